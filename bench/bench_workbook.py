"""Wall time of the whole workbook on the bundled model: `neuronkit run tiny-qwen3`, end to end.

Two arms, interleaved run by run (`neuronkit.timing.interleaved_medians`): `warm` (the default: each
notebook's kernel starts and imports torch/transformers while the previous notebook runs) and `cold`
(`--cold-kernels`: papermill starts each kernel when its notebook begins, as before). Each run is a
fresh `neuronkit run` process into a fresh run directory; the figure is the median over `--rounds`.
With `--baseline DIR` the arms are instead this tree and another checkout of neuronkit (its notebooks and
library, through PYTHONPATH), both with warm kernels: how much a change to the notebooks costs.

    python bench/bench_workbook.py --rounds 3
    python bench/bench_workbook.py --rounds 3 --baseline /tmp/neuronkit-main
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from neuronkit.timing import interleaved_medians


def workbook(out_root: Path, *flags: str, tree: Path | None = None):
    """A function running `neuronkit run tiny-qwen3` into a new directory under out_root each call (with
    `tree`, the neuronkit found there)."""
    counter = iter(range(1_000_000))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **({"PYTHONPATH": str(tree)} if tree else {})}

    def run() -> None:  # run outside any checkout: `python -m` would import the neuronkit in its cwd first
        out_root.mkdir(parents=True, exist_ok=True)
        out = out_root / f"run{next(counter)}"
        proc = subprocess.run([sys.executable, "-m", "neuronkit.cli", "run", "tiny-qwen3", "--out", str(out),
                               *flags], capture_output=True, text=True, env=env, cwd=out_root)
        if proc.returncode != 0:
            raise SystemExit(f"neuronkit run {' '.join(flags)} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per arm (default 3)")
    parser.add_argument("--baseline", type=Path, help="another neuronkit checkout to compare this tree with")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        arms = ({"this": workbook(Path(tmp) / "this", tree=here),
                 "baseline": workbook(Path(tmp) / "baseline", tree=args.baseline.resolve())} if args.baseline else
                {"warm": workbook(Path(tmp) / "warm"), "cold": workbook(Path(tmp) / "cold", "--cold-kernels")})
        medians = interleaved_medians(arms, runs=args.rounds, warmup=0)
    for arm, ms in medians.items():
        print(f"{arm:>8}: {ms / 1e3:6.1f} s")
    first, second = medians
    print(f"{first} / {second}: {medians[first] / medians[second]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
