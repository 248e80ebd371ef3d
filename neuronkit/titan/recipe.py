"""The seed's TorchTitan command on simulated cores: torchrun, FSDP2 over `NEURON_RT_NUM_CORES` ranks,
`--compile.enable --compile.backend neuron`, on the llama3 debug model, with this recipe's shims
(`python -m neuronkit.titan.train`) and offline assets (`neuronkit.titan.assets`)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from neuronkit.errors import NeuronkitInputError
from neuronkit.titan import assets as assets_module

# What each option is for; the first two lines are the seed's command shape.
OPTIONS = [
    "--module", "llama3", "--config", "llama3_debugmodel",
    "--compile.enable", "--compile.backend", "neuron",
    # FSDP2 on a 1-D data-parallel mesh: torchtitan's DTensor-for-model-parallel-axes path (its default,
    # spmd_types, wants every parameter a DTensor on the full mesh, which FSDP alone does not make)
    "--parallelism.spmd_backend", "partial_dtensor",
    "--metrics.disable_color_printing",
    "--debug.seed", "0",  # the same initial weights every run (torchtitan's default seed is random)
]
_LOSS = re.compile(r"step:\s*(\d+)\s+loss:\s*([0-9.]+)")


@dataclass(frozen=True)
class Run:
    """One finished run: the command, each rank's logged losses by step, and its output (rank 0's log)."""

    command: list[str]
    losses: dict[int, list[float]]
    log: str

    def shell(self) -> str:
        """The command as one would type it: `NEURON_RT_NUM_CORES=N torchrun ...`."""
        return _typed(self.command)

    def steps(self) -> list[str]:
        """Rank 0's lines that say what torchtitan applied and each step's loss, without the logger's prefix."""
        keep = ("Applied FSDP", "Compiling each", "step:")
        return [line.split(" - ", 2)[-1] for line in self.log.splitlines() if any(k in line for k in keep)]


def command(nproc: int, steps: int, assets: assets_module.Assets, out: Path, port: int, seq_len: int = 64,
            batch: int = 1) -> list[str]:
    """The torchrun command line (each rank's output in `out/logs`)."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=localhost:{port}", "--log-dir", str(out / "logs"), "--redirects=3",
            "-m", "neuronkit.titan.train", *OPTIONS, "--hf_assets_path", str(assets.tokenizer),
            "--dataloader.dataset_path", str(assets.dataset), "--training.steps", str(steps),
            "--training.seq_len", str(seq_len), "--training.local_batch_size", str(batch),
            "--dump_folder", str(out / "dump")]


def shell(nproc: int = 2, steps: int = 3, out: str | Path = "titan-run", port: int = 29500) -> str:
    """The command `run` launches, as one would type it, without running it (its assets would be written
    under `out/assets`)."""
    out = Path(out).resolve()
    files = assets_module.Assets(out / "assets" / "tokenizer", out / "assets" / "c4_test")
    return _typed(command(nproc, steps, files, out, port))


def _typed(cmd: list[str]) -> str:
    """`NEURON_RT_NUM_CORES=N torchrun ...` for a `command` line."""
    nproc = next(a.split("=", 1)[1] for a in cmd if a.startswith("--nproc-per-node="))
    return f"NEURON_RT_NUM_CORES={nproc} torchrun " + shlex.join(cmd[3:])


def run(nproc: int = 2, steps: int = 3, out: str | Path = "titan-run", timeout: float = 600) -> Run:
    """Run the recipe on `nproc` simulated cores for `steps` steps under `out`; raises RuntimeError with the
    failing rank's output when the job fails or outlives `timeout` seconds."""
    from neuronkit.distributed.launch import free_port, stop
    if nproc < 1 or steps < 1:
        raise NeuronkitInputError(f"the recipe needs at least one core and one step (nproc={nproc}, steps={steps})")
    out = Path(out).resolve()
    shutil.rmtree(out / "logs", ignore_errors=True)  # torchrun adds a directory per run: read this run's only
    cmd = command(nproc, steps, assets_module.write(out / "assets"), out, free_port())
    env = {**os.environ, "NEURON_RT_NUM_CORES": str(nproc), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("NEURON_RT_VISIBLE_CORES", None)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        launcher_output = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired as exc:
        stop(proc)
        raise RuntimeError(f"the TorchTitan recipe outlived {timeout:.0f} s") from exc
    logs = {int(rank.name): (rank / "stdout.log").read_text() + (rank / "stderr.log").read_text()
            for rank in (out / "logs").glob("*/attempt_0/*")}
    if proc.returncode != 0:
        failing = next((text for text in logs.values() if "Traceback" in text), launcher_output)
        raise RuntimeError(f"the TorchTitan recipe failed (exit {proc.returncode}):\n{failing[-4000:]}")
    losses = {rank: [float(loss) for _, loss in _LOSS.findall(text)] for rank, text in sorted(logs.items())}
    return Run(cmd, losses, logs.get(0, ""))
