"""The op-support policy of the `neuron` device, read from the package's `data/op_support.toml`.

One classifier serves the simulated device's kernel, the op audit and the compile backend, so all three
always agree on what runs natively, what falls back to CPU and what the first release does not support.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from typing import Literal

import torch

from neuronkit.resources import data_dir

Severity = Literal["ok", "info", "warn", "blocker"]

NATIVE = "native"
CPU_FALLBACK = "cpu_fallback"
FLOAT64_EMULATED = "float64_emulated"
INT64_EMULATED = "int64_emulated"
COMPLEX_DTYPE = "complex_dtype"
SDPA_CUSTOM_MASK = "sdpa_custom_mask"


@dataclass(frozen=True, slots=True)
class Rule:
    """How the device treats one ATen op (by base name, e.g. ``add`` for ``aten::add.Tensor``)."""

    name: str
    category: str  # stable id: native, cpu_fallback, sparse, dynamic_shape, ...
    is_view: bool = False  # compiles no NEFF, never reported as a fallback
    blocked: bool = False  # the first release raises NotImplementedError
    feature: str = ""
    remedy: str = ""

    @property
    def native(self) -> bool:
        """True when the op has a native Neuron lowering."""
        return self.category == NATIVE


@dataclass(frozen=True, slots=True)
class _Feature:
    category: str
    feature: str
    remedy: str
    ops: frozenset[str]
    prefixes: tuple[str, ...]
    blocked: bool

    def matches(self, name: str) -> bool:
        return name in self.ops or name.startswith(self.prefixes)


class Policy:
    """Classifies ATen ops and dtypes against the support table."""

    def __init__(self, table: dict) -> None:
        self.meta: dict = table.get("meta", {})
        self.native_ops = frozenset(table["native"]["ops"])
        self.view_ops = frozenset(table["views"]["ops"])
        self._features = tuple(
            _Feature(f["category"], f["feature"], f["remedy"], frozenset(f.get("ops", [])),
                     tuple(f.get("prefixes", [])), blocked=kind == "blocked")
            for kind in ("blocked", "finding")
            for f in table.get(kind, [])
        )
        self.severity: dict[str, Severity] = dict(table["categories"])
        dtypes = table["dtypes"]
        self.emulated_dtypes: dict[torch.dtype, torch.dtype] = {
            getattr(torch, wide): getattr(torch, narrow)
            for wide, narrow in dtypes.items() if wide in ("float64", "int64")
        }
        self.complex_dtypes = frozenset(getattr(torch, d) for d in dtypes["complex"])
        self.complex_remedy: str = dtypes["complex_remedy"]
        self.emulated_remedy: str = dtypes["emulated_remedy"]
        self.amp_dtypes = [getattr(torch, d) for d in dtypes["amp_dtypes"]]
        self.remedies: dict[str, str] = {f.category: f.remedy for f in self._features}
        self.remedies[CPU_FALLBACK] = (
            "Runs on the host: each call copies its inputs to CPU and its outputs back. Acceptable off the "
            "hot path; on it, rewrite with natively supported ops or ask for a lowering.")
        self.remedies[COMPLEX_DTYPE] = self.complex_remedy
        self.remedies[FLOAT64_EMULATED] = self.remedies[INT64_EMULATED] = self.emulated_remedy
        self.features: dict[str, str] = {f.category: f.feature for f in self._features}

    @property
    def categories(self) -> list[str]:
        """Every stable category id, in table order."""
        return list(self.severity)

    @functools.lru_cache(maxsize=None)
    def rule(self, name: str) -> Rule:
        """The rule for an ATen base name (``aten::`` prefix, overload and trailing ``_`` tolerated)."""
        name = base_name(name)
        for feature in self._features:
            if feature.matches(name):
                if feature.blocked:
                    return Rule(name, feature.category, blocked=True, feature=feature.feature,
                                remedy=feature.remedy)
                # A finding keeps the op running; natively when a lowering exists.
                return Rule(name, feature.category, feature=feature.feature, remedy=feature.remedy)
        if name in self.view_ops:
            return Rule(name, NATIVE, is_view=True)
        if name in self.native_ops or name.rstrip("_") in self.native_ops:
            return Rule(name, NATIVE)
        return Rule(name, CPU_FALLBACK, feature="no native Neuron lowering",
                    remedy=self.remedies[CPU_FALLBACK])

    def runs_natively(self, name: str) -> bool:
        """Whether the op (including a finding such as ``nonzero``) has a native lowering."""
        name = base_name(name)
        return name in self.native_ops or name.rstrip("_") in self.native_ops or name in self.view_ops

    def dtype_category(self, dtype: torch.dtype) -> str | None:
        """`float64_emulated`, `int64_emulated`, `complex_dtype`, or None for a native dtype."""
        if dtype in self.complex_dtypes:
            return COMPLEX_DTYPE
        if dtype is torch.float64:
            return FLOAT64_EMULATED
        if dtype is torch.int64:
            return INT64_EMULATED
        return None


def base_name(name: str) -> str:
    """`aten::add.Tensor` / `aten.add.Tensor` / `add.Tensor` -> `add`."""
    if name.startswith(("aten::", "aten.")):
        name = name[5:].lstrip(":.")
    return name.split(".", 1)[0]


@functools.lru_cache(maxsize=1)
def load_policy() -> Policy:
    """The policy from `data/op_support.toml`, parsed once per process."""
    path = data_dir() / "op_support.toml"
    try:
        with path.open("rb") as fh:
            return Policy(tomllib.load(fh))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"neuronkit's op-support table is missing: {path}. Reinstall neuronkit."
        ) from None
