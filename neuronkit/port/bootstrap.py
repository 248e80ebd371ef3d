"""The process `neuronkit port --run` starts (one per rank under torchrun): runs the user's rewritten script as
`__main__` with its own arguments, stops it after N optimizer steps through a global optimizer-step hook (the
script is not edited), and writes what happened to `OUT/rank<R>.json`.

    python -m neuronkit.port.bootstrap --steps N --out DIR --script COPY.py -- ARGS...
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any


class StepBudgetReached(BaseException):
    """Raised by the optimizer-step hook after the N-th step; a BaseException, so a script's own
    `except Exception` does not swallow it."""


class RunRecorder:
    """Counts optimizer steps and, until the first step is done, where the script issues ops that fall back
    (observing every op routes it through the device's Python path, so only the first step is observed)."""

    def __init__(self, script: Path, steps: int) -> None:
        self.script = str(script)
        self.budget = steps
        self.steps = 0
        self.fallback_sites: Counter[tuple[str, int | None]] = Counter()
        self._observing = False

    def start(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        from neuronkit.device.simulator import tracking
        register_optimizer_step_post_hook(self._after_step)
        tracking.observers.append(self._on_op)
        self._observing = True

    def stop_observing(self) -> None:
        if self._observing:
            from neuronkit.device.simulator import tracking
            tracking.observers.remove(self._on_op)
            self._observing = False

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.steps += 1
        self.stop_observing()
        if self.steps >= self.budget:
            raise StepBudgetReached(self.steps)

    def _on_op(self, event: Any) -> None:
        if event.fallback:
            name = event.name + ("" if event.overload in ("", "default") else f".{event.overload}")
            self.fallback_sites[(name, self.line_in_script(sys._getframe(1)))] += 1

    def line_in_script(self, frame: FrameType | None) -> int | None:
        """The line of the innermost frame in the script, walking outwards from `frame`."""
        while frame is not None:
            if frame.f_code.co_filename == self.script:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def crash_line(self, tb: TracebackType | None) -> int | None:
        """The script's innermost line in a traceback."""
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.script:
                line = tb.tb_lineno
            tb = tb.tb_next
        return line


def _peak_memory() -> dict[str, int]:
    """Peak bytes allocated per core this process could read (under torchrun: its own core)."""
    import torch
    peaks = {}
    for index in range(torch.neuron.device_count()):
        try:
            peak = torch.neuron.max_memory_allocated(index)
        except (RuntimeError, ValueError):
            continue  # another rank's core
        if peak:
            peaks[f"neuron:{index}"] = peak
    return peaks


def run(script: Path, steps: int, out: Path, script_args: list[str]) -> int:
    """Run `script` until it ends or takes `steps` optimizer steps; write the record; 0 unless it crashed."""
    recorder = RunRecorder(script, steps)
    recorder.start()
    record: dict[str, Any] = {"rank": int(os.environ.get("RANK", "0")), "status": "finished", "error": None,
                              "error_line": None, "exit_code": 0}
    sys.argv = [str(script), *script_args]
    sys.path.insert(0, str(script.parent))
    start = time.perf_counter()
    try:
        runpy.run_path(str(script), run_name="__main__")
    except StepBudgetReached:
        record["status"] = "stopped"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        record.update(status="exited", exit_code=code)
        if code:
            record["error"] = f"SystemExit: {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - the user's crash is the result
        traceback.print_exc()
        record.update(status="crashed", exit_code=1, error=f"{type(exc).__name__}: {' '.join(str(exc).split())}",
                      error_line=recorder.crash_line(exc.__traceback__))
    record["script_s"] = time.perf_counter() - start
    recorder.stop_observing()
    import torch
    import torch_neuronx
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    record.update(
        steps=recorder.steps,
        fallback_ops=sorted(set(torch_neuronx.get_fallback_ops())),
        fallback_sites=[{"op": op, "line": line, "count": n}
                        for (op, line), n in sorted(recorder.fallback_sites.items(), key=lambda i: (i[0][1] or 0, i[0][0]))],
        peak_memory=_peak_memory(),
        neff=torch.neuron.neff_cache_stats(),
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record, default=str))
    return record["exit_code"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="neuronkit.port.bootstrap")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--script", type=Path, required=True)
    args = parser.parse_args(argv[:cut])
    return run(args.script.resolve(), args.steps, args.out, argv[cut + 1:])


if __name__ == "__main__":
    sys.exit(main())
