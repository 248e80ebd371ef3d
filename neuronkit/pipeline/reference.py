"""The CPU reference: the inputs, outputs, loss and gradient norm every device stage is held to.

The CPU baseline (workbook stage 01, or `check`'s `cpu` stage) computes it once; the eager (02) and
compile (04) stages read it back instead of running the CPU model again, so all of them compare against
the same numbers. It is saved as one safetensors file (tensors plus string metadata: nothing unpickled).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from neuronkit.errors import NeuronkitInputError

_INPUT = "input:"
_OUTPUT = "output:"


@dataclass
class Reference:
    """Named CPU tensors in (the example inputs) and out (`compare.named_outputs` of the CPU forward),
    and the loss and total gradient norm of one forward and backward in the same mode."""

    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]
    loss: float | None
    grad_norm: float | None

    def save(self, path: str | Path) -> Path:
        """Write the reference as one safetensors file."""
        tensors = {f"{_INPUT}{k}": v for k, v in self.inputs.items()}
        tensors.update({f"{_OUTPUT}{k}": v for k, v in self.outputs.items()})
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}, str(path),
                  metadata={"loss": json.dumps(self.loss), "grad_norm": json.dumps(self.grad_norm),
                            "order": json.dumps(list(tensors))})  # the file itself does not keep the order
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Reference":
        """Read a reference `save` wrote; a missing or unreadable file is one clear line."""
        path = Path(path)
        if not path.is_file():
            raise NeuronkitInputError(f"no CPU reference at {path}: run the CPU baseline (notebook 01) first")
        try:
            with safe_open(str(path), framework="pt") as handle:
                meta = handle.metadata() or {}
                order = json.loads(meta.get("order", "[]")) or sorted(handle.keys())
                tensors = {key: handle.get_tensor(key) for key in order}
            loss, grad_norm = json.loads(meta.get("loss", "null")), json.loads(meta.get("grad_norm", "null"))
        except (SafetensorError, OSError, ValueError) as exc:
            raise NeuronkitInputError(f"unreadable CPU reference {path}: {exc}") from None
        return cls({k.removeprefix(_INPUT): v for k, v in tensors.items() if k.startswith(_INPUT)},
                   {k.removeprefix(_OUTPUT): v for k, v in tensors.items() if k.startswith(_OUTPUT)},
                   loss, grad_norm)
