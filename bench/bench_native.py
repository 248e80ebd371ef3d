"""The native device runtime's fixed costs: what autoload adds to `import torch`, and the build time.

Import: fresh interpreters running `import torch`, with autoload off (`TORCH_DEVICE_BACKEND_AUTOLOAD=0`)
and on, interleaved one by one (off, on, off, ...) so machine noise hits both alike; medians.
Build: `setup.py build_ext` of a clean copy of the sources (what `pip install` compiles), wall time.

    python bench/bench_native.py [--runs 15] [--build]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Run

ROOT = Path(__file__).resolve().parent.parent


def _import_seconds(autoload: bool) -> float:
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1" if autoload else "0"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True, cwd=ROOT)
    return time.perf_counter() - start


def import_cost(runs: int) -> tuple[float, float]:
    """Median seconds of `import torch` without and with the simulated device, interleaved."""
    samples: dict[bool, list[float]] = {False: [], True: []}
    _import_seconds(True)  # warm the page cache
    for _ in range(runs):
        for autoload in (False, True):
            samples[autoload].append(_import_seconds(autoload))
    return statistics.median(samples[False]), statistics.median(samples[True])


def build_seconds() -> float:
    """Wall time of compiling the extension from a clean copy of the sources."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(ROOT / "neuronkit" / "device" / "simulator" / "csrc",
                        copy / "neuronkit" / "device" / "simulator" / "csrc")
        shutil.copy(ROOT / "setup.py", copy)
        start = time.perf_counter()
        subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", str(copy / "lib")], cwd=copy,
                       check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--build", action="store_true", help="also time a clean build of the extension")
    args = parser.parse_args()
    with Run("native", "Native runtime fixed costs",
             f"python bench/bench_native.py --runs {args.runs}{' --build' * args.build}") as run:
        run.columns(measure="measure", seconds=("seconds", "{:.3f} s"))
        run.note = (f"`import torch` in fresh interpreters with autoload off and on, interleaved, medians of "
                    f"{args.runs}; the clean build is `setup.py build_ext` of a copy of the sources.")
        off, on = import_cost(args.runs)
        run.row(measure="`import torch` without autoload", seconds=off)
        run.row(measure="`import torch` with autoload", seconds=on)
        run.row(measure="added by autoload", seconds=on - off)
        if args.build:
            run.row(measure=f"clean build of the extension ({os.cpu_count()} cores)", seconds=build_seconds())


if __name__ == "__main__":
    main()
