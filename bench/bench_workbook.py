"""Wall time of the whole workbook on the bundled model: `neuronkit run tiny-qwen3`, end to end.

Two arms, interleaved run by run (`neuronkit.timing.interleaved_medians`): `warm` (the default: each
notebook's kernel starts and imports torch/transformers while the previous notebook runs) and `cold`
(`--cold-kernels`: papermill starts each kernel when its notebook begins, as before). Each run is a
fresh `neuronkit run` process into a fresh run directory; the figure is the median over `--rounds`.

    python bench/bench_workbook.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from neuronkit.timing import interleaved_medians


def workbook(out_root: Path, *flags: str):
    """A function running `neuronkit run tiny-qwen3` into a new directory under out_root each call."""
    counter = iter(range(1_000_000))

    def run() -> None:
        out = out_root / f"run{next(counter)}"
        proc = subprocess.run([sys.executable, "-m", "neuronkit.cli", "run", "tiny-qwen3", "--out", str(out),
                               *flags], capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if proc.returncode != 0:
            raise SystemExit(f"neuronkit run {' '.join(flags)} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per arm (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        medians = interleaved_medians({"warm": workbook(Path(tmp) / "warm"),
                                       "cold": workbook(Path(tmp) / "cold", "--cold-kernels")},
                                      runs=args.rounds, warmup=0)
    for arm, ms in medians.items():
        print(f"{arm:>5}: {ms / 1e3:6.1f} s")
    print(f"warm / cold: {medians['warm'] / medians['cold']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
