"""The process `neuronkit port --run` starts (one per rank under torchrun): runs the user's rewritten script as
`__main__` with its own arguments, stops it after N optimizer steps through a global optimizer-step hook (the
script is not edited), and writes what happened to `OUT/<process>.json`.

Processes the script starts itself with torch.multiprocessing (`mp.spawn`, the native form of `xmp.spawn`)
are observed the same way: each child records itself as `rank<index>` and stops after N steps; the process
that spawned them records itself as `launcher`, with how many it started.

    python -m neuronkit.port.bootstrap --steps N --out DIR --script COPY.py [--file F ...] [--no-audit] -- ARGS...
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import runpy
import sys
import time
import traceback
import warnings
import weakref
from collections import Counter
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

_ACTIVE: list[RunRecorder] = []  # this process's recorders (a forked child closes the ones it inherited)


class StepBudgetReached(BaseException):
    """Raised by the optimizer-step hook after the N-th step; a BaseException, so a script's own
    `except Exception` does not swallow it."""


class RunRecorder:
    """What one process of the run did: optimizer steps (a step of an optimizer that wraps another, such as
    ZeroRedundancyOptimizer, counts once), the loss of each step (the sum of what `.backward()` was called on
    since the step before: the micro-batches of gradient accumulation add up; unscaled when a GradScaler scaled
    it; dropped with a step the GradScaler skipped for inf/NaN gradients), where ops fell back to the CPU until
    the first step is done (observing every op routes it through the device's Python path), GradScalers that
    disabled themselves and were used, and the op audit of the first model the script calls."""

    def __init__(self, files: set[str], steps: int, audit: bool = True) -> None:
        self.files = files
        self.budget = steps
        self.steps = 0
        self.losses: list[float] = []
        self._pending: list[float] = []  # losses backpropagated since the last step
        self.fallback_sites: Counter[tuple[str, str | None, int | None]] = Counter()
        self.disabled_scalers: list[str] = []
        self.model_audit: dict[str, Any] | None = None
        self._audit = audit
        self._observing = False
        self._depth = 0
        self._module_hooks: list[Any] = []
        self._scaled: weakref.WeakSet = weakref.WeakSet()
        self._handles: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []

    # --- hooks ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        for inherited in list(_ACTIVE):
            inherited.close()
        _ACTIVE.append(self)
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        from neuronkit.device.simulator import tracking
        self._handles += [register_optimizer_step_pre_hook(self._before_step),
                          register_optimizer_step_post_hook(self._after_step)]
        tracking.observers.append(self._on_op)
        self._observing = True
        self._watch_losses(torch)
        if self._audit:
            self._module_hooks = [torch.nn.modules.module.register_module_forward_pre_hook(self._first_forward)]
            self._handles += self._module_hooks
            # torch.compile warns of global module hooks once per call while they exist: here they are
            # neuronkit's, and gone after the first call
            warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")

    def stop_observing(self) -> None:
        if self._observing:
            from neuronkit.device.simulator import tracking
            tracking.observers.remove(self._on_op)
            self._observing = False

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._depth += 1

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._depth -= 1
        if self._depth > 0:
            return  # the inner optimizer of a wrapper: its step is the wrapper's
        self.steps += 1
        if self._pending:
            self.losses.append(sum(self._pending))
            self._pending.clear()
        self.stop_observing()
        if self.steps >= self.budget:
            raise StepBudgetReached(self.steps)

    def _watch_losses(self, torch: Any) -> None:
        """Record the loss each step backpropagates: `loss.backward()` on a one-element tensor, or the value a
        GradScaler scales before its backward. A GradScaler's step that found inf/NaN gradients does not call the
        optimizer's step: what was backpropagated for it is dropped, not added to the next step's loss."""
        recorder = self
        disabled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scaler -> its warning, until used
        backward = torch.Tensor.backward
        scale = torch.amp.GradScaler.scale
        scaler_step = torch.amp.GradScaler.step
        init = torch.amp.GradScaler.__init__

        def recorded_backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if tensor.numel() == 1 and tensor not in recorder._scaled:
                recorder._pending.append(float(tensor.detach().float().cpu()))
            return backward(tensor, *args, **kwargs)

        def used(scaler: Any) -> None:
            """A GradScaler that disabled itself is a warning once the script scales or steps with it (Lightning
            makes one for "cuda" and replaces it with the device's before training)."""
            warning = disabled.pop(scaler, None)
            if warning is not None and warning not in recorder.disabled_scalers:
                recorder.disabled_scalers.append(warning)

        def recorded_scale(scaler: Any, outputs: Any) -> Any:
            used(scaler)
            scaled = scale(scaler, outputs)
            if isinstance(outputs, torch.Tensor) and outputs.numel() == 1:
                recorder._pending.append(float(outputs.detach().float().cpu()))
                if isinstance(scaled, torch.Tensor):
                    recorder._scaled.add(scaled)
            return scaled

        def recorded_step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            used(scaler)
            steps = recorder.steps
            result = scaler_step(scaler, optimizer, *args, **kwargs)
            if recorder.steps == steps and recorder._depth == 0:  # skipped: inf/NaN gradients
                recorder._pending.clear()
            return result

        def watched_init(scaler: Any, *args: Any, **kwargs: Any) -> None:
            init(scaler, *args, **kwargs)
            if not scaler._enabled and kwargs.get("enabled", True):
                disabled[scaler] = (f"a GradScaler for {scaler._device!r} disabled itself (no such device here): "
                                    "float16 steps are not loss-scaled")

        self._restore += [(torch.Tensor, "backward", backward), (torch.amp.GradScaler, "scale", scale),
                          (torch.amp.GradScaler, "step", scaler_step), (torch.amp.GradScaler, "__init__", init)]
        torch.Tensor.backward = recorded_backward
        torch.amp.GradScaler.scale = recorded_scale
        torch.amp.GradScaler.step = recorded_step
        torch.amp.GradScaler.__init__ = watched_init

    def _first_forward(self, module: Any, args: Any, kwargs: Any = None) -> None:
        """The first module called (the model, not one of its layers): audited, then the hooks go."""
        if self.model_audit is None:
            for handle in self._module_hooks:
                handle.remove()  # first: the audit calls the model too
            self.model_audit = audit_model(module, args)

    def _on_op(self, event: Any) -> None:
        if event.fallback:
            name = event.name + ("" if event.overload in ("", "default") else f".{event.overload}")
            self.fallback_sites[(name, *self.where(sys._getframe(1)))] += 1

    def close(self) -> None:
        self.stop_observing()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    # --- where in the project ------------------------------------------------------------------------------
    def where(self, frame: FrameType | None) -> tuple[str | None, int | None]:
        """The project file and line of the innermost frame in the project, walking outwards from `frame`."""
        while frame is not None:
            if frame.f_code.co_filename in self.files:
                return frame.f_code.co_filename, frame.f_lineno
            frame = frame.f_back
        return None, None

    def crash_location(self, tb: TracebackType | None) -> tuple[str | None, int | None]:
        """The project's innermost file and line in a traceback."""
        found: tuple[str | None, int | None] = (None, None)
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in self.files:
                found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
            tb = tb.tb_next
        return found


def audit_model(module: Any, args: Any) -> dict[str, Any]:
    """The op audit of the first model the script calls, on a CPU copy of it and of its inputs: its blockers
    (what the device cannot run, such as an LSTM's fused cell), before the device meets them. The audit's
    recorder and classifier, without its runner (which loads transformers: seconds in every run)."""
    import torch
    from torch.utils._pytree import tree_map_only

    from neuronkit.op_audit.classify import classify
    from neuronkit.op_audit.recorder import OpRecorder
    from neuronkit.policy import load_policy

    model = getattr(module, "module", module) if type(module).__name__ in (
        "DistributedDataParallel", "DataParallel", "FullyShardedDataParallel") else module
    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
    try:
        copy_ = copy.deepcopy(model).cpu()
        inputs = tree_map_only(torch.Tensor, lambda t: t.detach().cpu(), tuple(args))
        with torch.no_grad(), OpRecorder(copy_) as recorder:
            copy_(*inputs)
        _, findings, _ = classify(recorder.ops, load_policy())
    except Exception as exc:  # noqa: BLE001 - the run goes on; the record says the audit could not run
        return {"module": type(model).__name__, "blockers": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    blockers = [{"category": f.category, "op": f.op, "modules": list(f.module_paths[:3]), "remedy": f.remedy}
                for f in findings if f.severity == "blocker"]
    return {"module": type(model).__name__, "blockers": blockers, "error": None}


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


class _Spawned:
    """A function torch.multiprocessing starts, run under a recorder in the child (picklable: the spawn start
    method imports this module in the child)."""

    def __init__(self, fn: Any, steps: int, out: str, files: set[str], audit: bool) -> None:
        self.fn, self.steps, self.out, self.files, self.audit = fn, steps, out, files, audit

    def __call__(self, index: int, *args: Any) -> None:
        record = _Record(f"rank{index}", index)
        recorder = RunRecorder(self.files, self.steps, self.audit and index == 0)
        recorder.start()
        try:
            self.fn(index, *args)
        except StepBudgetReached:
            record.data["status"] = "stopped"
        except BaseException as exc:
            record.crashed(exc, recorder)
            record.finish(recorder, Path(self.out))
            raise
        record.finish(recorder, Path(self.out))


def _observe_spawns(steps: int, out: Path, files: set[str], audit: bool, started: list[int]) -> None:
    """Processes started through torch.multiprocessing (mp.spawn and start_processes) run under a recorder."""
    import torch.multiprocessing

    spawn_module = sys.modules["torch.multiprocessing.spawn"]  # the package's `spawn` is the function
    start = spawn_module.start_processes

    def observed(fn: Any, args: Any = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                 start_method: str = "spawn") -> Any:
        started.append(nprocs)
        return start(_Spawned(fn, steps, str(out), files, audit), args, nprocs, join, daemon, start_method)

    spawn_module.start_processes = observed
    torch.multiprocessing.start_processes = observed


class _Record:
    """One process's record, as it is filled in."""

    def __init__(self, name: str, rank: int) -> None:
        self.name = name
        self.data: dict[str, Any] = {"process": name, "rank": rank, "status": "finished", "error": None,
                                     "error_file": None, "error_line": None, "exit_code": 0}
        self.start = time.perf_counter()

    def crashed(self, exc: BaseException, recorder: RunRecorder) -> None:
        traceback.print_exc()
        first = " ".join(str(exc).split())
        where = recorder.crash_location(exc.__traceback__)
        self.data.update(status="crashed", exit_code=1, error=f"{type(exc).__name__}: {first}",
                         error_file=where[0], error_line=where[1])

    def finish(self, recorder: RunRecorder, out: Path) -> None:
        import torch
        import torch_neuronx
        self.data["script_s"] = time.perf_counter() - self.start
        recorder.close()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        self.data.update(
            steps=recorder.steps, losses=recorder.losses, warnings=recorder.disabled_scalers,
            model_audit=recorder.model_audit,
            fallback_ops=sorted(set(torch_neuronx.get_fallback_ops())),
            fallback_sites=[{"op": op, "file": file, "line": line, "count": n}
                            for (op, file, line), n in sorted(recorder.fallback_sites.items(),
                                                              key=lambda i: (i[0][2] or 0, i[0][0]))],
            peak_memory=_peak_memory(), neff=torch.neuron.neff_cache_stats(),
            device_ops=len(torch_neuronx.get_executed_ops()),
        )
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.name}.json").write_text(json.dumps(self.data, default=str))


def run(script: Path, steps: int, out: Path, script_args: list[str], files: list[str] | None = None,
        audit: bool = True) -> int:
    """Run `script` until it ends or takes `steps` optimizer steps; write the record; 0 unless it crashed."""
    project = {str(script), *(files or [])}
    started: list[int] = []
    _observe_spawns(steps, out, project, audit, started)
    rank = int(os.environ.get("RANK", "0"))
    recorder = RunRecorder(project, steps, audit and rank == 0)  # one audit per run: the model is the same
    recorder.start()
    record = _Record(f"rank{rank}", rank)
    sys.argv = [str(script), *script_args]
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except StepBudgetReached:
        record.data["status"] = "stopped"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        record.data.update(status="exited", exit_code=code)
        if code:
            record.data["error"] = f"SystemExit: {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - the user's crash is the result
        record.crashed(exc, recorder)
    if started:  # the script started its own processes: this one only launched them
        record.name = "launcher"
        record.data.update(process="launcher", spawned=sum(started))
    record.finish(recorder, out)
    return record.data["exit_code"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="neuronkit.port.bootstrap")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--file", action="append", default=[], help="another file of the project (for lines)")
    parser.add_argument("--no-audit", action="store_true", help="do not audit the first model the script calls")
    args = parser.parse_args(argv[:cut])
    return run(args.script.resolve(), args.steps, args.out, argv[cut + 1:], args.file, audit=not args.no_audit)


if __name__ == "__main__":
    # as the importable module: what torch.multiprocessing pickles for a child (`_Spawned`) is found by name there
    from neuronkit.port import bootstrap

    sys.exit(bootstrap.main())
