"""The bench scripts' one harness: measure, note the machine and its load, write the figures as JSON.

A script opens a `Run` (named after its RESULTS.md section), adds rows of raw numbers, and on exit the run is
written to `bench/results/<name>.json` with the date, the machine, and the 1/5/15-minute load averages
before and after. `bench/make_results.py` turns those files into bench/RESULTS.md's tables; figures are never
typed into the markdown by hand. Timing goes through `neuronkit.timing` (device synchronized around each
sample; interleaved medians), so every script measures the same way.

    with Run("plan", "Parallel plan", "python bench/bench_plan.py") as run:
        run.columns(case="case", wall_s=("wall time", "{:.1f} s"), rss_gb=("peak RSS", "{:.2f} GB"))
        run.row(case="tp=4", wall_s=13.6, rss_gb=0.38)
        run.note = "Target: <= 60 s and <= 2 GB."
"""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["RESULTS_DIR", "Run", "interleaved_medians", "load_average", "machine", "peak_rss_gb", "timed"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def interleaved_medians(fns: dict[str, Callable[[], object]], runs: int = 5, warmup: int = 1,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """`neuronkit.timing.interleaved_medians`, imported on first use: importing this module loads no torch, so
    a script's fresh child processes measure their own peak memory, not an inherited one."""
    from neuronkit import timing

    return timing.interleaved_medians(fns, runs, warmup, clock)


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    """`neuronkit.timing.timed` (one call's result and wall seconds, device synchronized), imported on first use."""
    from neuronkit import timing

    return timing.timed(fn)


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages, rounded: how busy the machine was."""
    return [round(value, 2) for value in os.getloadavg()]


def machine() -> str:
    """The machine in one line: architecture, CPUs, Python and torch versions."""
    import torch

    return (f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def peak_rss_gb(children: bool = False) -> float:
    """Peak resident memory of this process (or of its waited-for children), in GB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss * 1024 / 1e9


class Run:
    """One benchmark run: its columns (key -> label, or (label, format)), rows of raw values and a note."""

    def __init__(self, name: str, title: str, command: str, directory: Path = RESULTS_DIR) -> None:
        self.name, self.title, self.command, self.directory = name, title, command, directory
        self.note = ""
        self._columns: dict[str, dict[str, str]] = {}
        self.rows: list[dict[str, Any]] = []
        self.load_before: list[float] = []

    def columns(self, **columns: str | tuple[str, str]) -> None:
        """Declare the table's columns in order: `key="label"` or `key=("label", "{:.1f} ms")`."""
        self._columns = {key: {"label": spec, "format": "{}"} if isinstance(spec, str)
                         else {"label": spec[0], "format": spec[1]} for key, spec in columns.items()}

    def row(self, **values: Any) -> None:
        """One row of raw values, by column key (a missing key is an empty cell)."""
        unknown = set(values) - set(self._columns)
        if unknown:
            raise ValueError(f"{self.name}: values for undeclared columns {sorted(unknown)}")
        self.rows.append(values)
        print(json.dumps(values), flush=True)

    def __enter__(self) -> Run:
        self.load_before = load_average()
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is None:
            print(f"written to {self.write()}")

    def write(self) -> Path:
        """The run as `<directory>/<name>.json`."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.name}.json"
        record = {"name": self.name, "title": self.title, "command": self.command,
                  "date": time.strftime("%Y-%m-%d"), "machine": machine(), "load_before": self.load_before,
                  "load_after": load_average(), "note": self.note, "columns": self._columns, "rows": self.rows}
        path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path
