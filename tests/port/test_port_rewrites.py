"""`neuronkit port`'s rewrites keep the script's behaviour: for every rewrite rule, a snippet written the way
scripts write it runs as the original on the CPU (this machine has no CUDA; PyTorch/XLA snippets run on
tests/port/corpus/xla_cpu, a CPU stand-in for torch_xla) and, rewritten, on the simulated device; the two give
the same result and take the same lines (a device guard's branch, which only moves work or keeps device
bookkeeping, may run on neuron where it did not without CUDA). Where the original cannot run without CUDA
(a `.cuda()`, a `torch.cuda.synchronize()`), its `cpu` spelling gives the result to match."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from dataclasses import dataclass

import pytest
import torch
from conftest import ROOT

from neuronkit.port.rules import load_rules
from neuronkit.port.scan import scan_source

XLA_CPU = ROOT / "tests" / "port" / "corpus" / "xla_cpu"
# Rewrites tested end to end instead: xmp.spawn starts processes (tests/port/test_port_corpus.py, the xla_spawn
# project in 1 and 2 processes, against its run on the CPU stand-in).
BY_THE_CORPUS = {"xmp-spawn": "tests/port/test_port_corpus.py::...[xla_spawn]"}


@dataclass(frozen=True)
class Case:
    rule: str
    snippet: str  # sets `result` (after `import torch`)
    cpu: str | None = None  # the same computation spelled for the CPU, when the original needs CUDA
    rtol: float = 0.0
    fresh: bool = False  # makes a process group: runs in a new process (forked_python)
    traced: bool = True  # its lines are compared (compile-backend: one line, and tracing dynamo's own Python
    #                      while it compiles costs seconds)

    @property
    def original(self) -> str:
        return "import torch\n" + self.snippet

    @property
    def xla(self) -> bool:
        return "torch_xla" in self.snippet


# Side streams as scripts overlap work with them (one snippet for each of the stream rules).
STREAMS = ("side = torch.cuda.Stream()\nwith torch.cuda.stream(side):\n    y = torch.arange(4.0, device='cuda') * 2\n"
           "torch.cuda.current_stream().wait_stream(side)\ntorch.cuda.set_stream(torch.cuda.default_stream())\n"
           "result = y")
CASES = [
    # --- where the work runs
    Case("tensor-cuda", "x = torch.arange(6.0)\ny = x.cuda()\nz = x.cuda(0)\nw = x.cuda(torch.device('cuda', 1))\n"
         "result = (y * 2, z + 1, w.sum())", cpu="x = torch.arange(6.0)\nresult = (x * 2, x + 1, x.sum())"),
    Case("device-string", "x = torch.ones(3, device='cuda')\nresult = x.to('cuda:1') * 3",
         cpu="x = torch.ones(3)\nresult = x * 3"),
    Case("device-string", "rank = 1\nx = torch.ones(2)\n"
         "result = [x.to('cuda:%d' % rank), x.to('cuda:{}'.format(rank)), x.to('cuda:' + str(rank))]",
         cpu="x = torch.ones(2)\nresult = [x, x, x]"),
    Case("generator-device", "g = torch.Generator(device='cuda').manual_seed(0)\n"
         "result = (torch.randn(3, device='cuda', generator=g), torch.randperm(5, device='cuda', generator=g))",
         cpu="g = torch.Generator().manual_seed(0)\nresult = (torch.randn(3, generator=g), torch.randperm(5, generator=g))"),
    Case("lightning-accelerator", "import lightning as L\n"
         "trainer = L.Trainer(accelerator='gpu', devices=1, logger=False, enable_progress_bar=False)\n"
         "result = torch.arange(3.0, device=trainer.strategy.root_device) * 2",
         cpu="result = torch.arange(3.0) * 2"),
    Case("device-choice", "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
         "result = torch.arange(4.0, device=device).pow(2)"),
    Case("device-choice", "device = 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() "
         "else 'cpu'\nresult = torch.arange(4.0, device=device).pow(2)"),
    Case("device-guard", "torch.manual_seed(0)\nmodel = torch.nn.Linear(3, 2)\nx = torch.randn(4, 3)\n"
         "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
         "if torch.cuda.is_available():\n    model = model.cuda()\n    x = x.cuda()\n"
         "result = model(x).sum()", rtol=1e-6),
    Case("cuda-visible-devices", "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\nresult = torch.arange(3) * 2"),
    Case("nccl-backend", "import torch.distributed as dist\n"
         "dist.init_process_group('nccl', store=dist.HashStore(), rank=0, world_size=1)\n"
         "t = torch.ones(2).cuda()\ndist.all_reduce(t)\nresult = t.cpu().tolist()",
         cpu="import torch.distributed as dist\n"
         "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
         "t = torch.ones(2)\ndist.all_reduce(t)\nresult = t.tolist()", fresh=True),
    Case("nccl-backend-enum", "import torch.distributed as dist\n"
         "dist.init_process_group(backend=dist.Backend.NCCL, store=dist.HashStore(), rank=0, world_size=1)\n"
         "t = torch.ones(2).cuda()\ndist.all_reduce(t)\nresult = t.cpu().tolist()",
         cpu="import torch.distributed as dist\n"
         "dist.init_process_group(backend=dist.Backend.GLOO, store=dist.HashStore(), rank=0, world_size=1)\n"
         "t = torch.ones(2)\ndist.all_reduce(t)\nresult = t.tolist()", fresh=True),
    Case("device-id", "import torch.distributed as dist\n"
         "dist.init_process_group('nccl', store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device('cuda', 0))\n"
         "result = dist.get_world_size()",
         cpu="import torch.distributed as dist\n"
         "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\nresult = dist.get_world_size()",
         fresh=True),
    # --- mixed precision
    Case("cuda-amp-autocast", "x = torch.ones(2, 2)\nwith torch.cuda.amp.autocast(dtype=torch.bfloat16):\n"
         "    result = (x @ x).float()"),
    Case("grad-scaler", "torch.manual_seed(0)\nmodel = torch.nn.Linear(3, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
         "scaler = torch.cuda.amp.GradScaler()\nloss = model(torch.ones(2, 3)).sum()\nscaler.scale(loss).backward()\n"
         "scaler.step(opt)\nscaler.update()\nresult = model.weight.detach()", rtol=1e-6),
    Case("hf-tf32", "from transformers import TrainingArguments\n"
         "args = TrainingArguments(output_dir='out', tf32=True, report_to=[])\nresult = args.learning_rate",
         cpu="result = 5e-05"),
    # --- torch.cuda functions
    Case("current-device", "result = torch.cuda.current_device()", cpu="result = 0"),
    Case("set-device", "torch.cuda.set_device(0)\nresult = torch.arange(2) + 1", cpu="result = torch.arange(2) + 1"),
    # nanoGPT's `device = f'cuda:{ddp_local_rank}'; torch.cuda.set_device(device)`: S's takes no string
    Case("set-device", "rank = 0\ndevice = f'cuda:{rank}'\ntorch.cuda.set_device(device)\nresult = torch.arange(2) + 1",
         cpu="result = torch.arange(2) + 1"),
    Case("device-context", "with torch.cuda.device(0):\n    result = torch.arange(2) * 5", cpu="result = torch.arange(2) * 5"),
    Case("get-device-name", "result = isinstance(torch.cuda.get_device_name(0), str)", cpu="result = True"),
    Case("synchronize", "x = torch.arange(3.0)\ntorch.cuda.synchronize()\nresult = x * 2", cpu="result = torch.arange(3.0) * 2"),
    Case("empty-cache", "x = torch.arange(3.0)\ntorch.cuda.empty_cache()\nresult = x - 1"),
    Case("manual-seed", "torch.manual_seed(0)\ntorch.cuda.manual_seed(3)\nresult = torch.rand(2)"),
    Case("manual-seed-all", "torch.manual_seed(0)\ntorch.cuda.manual_seed_all(3)\nresult = torch.rand(2)"),
    Case("seed", "torch.manual_seed(0)\ntorch.cuda.seed()\nresult = torch.rand(2)"),
    Case("seed-all", "torch.manual_seed(0)\ntorch.cuda.seed_all()\nresult = torch.rand(2)"),
    Case("initial-seed", "torch.cuda.manual_seed(7)\nresult = torch.cuda.initial_seed()", cpu="result = 7"),
    Case("get-rng-state", "state = torch.cuda.get_rng_state()\nresult = state.dtype", cpu="result = torch.uint8"),
    Case("set-rng-state", "state = torch.cuda.get_rng_state()\ntorch.cuda.set_rng_state(state)\nresult = 1",
         cpu="result = 1"),
    Case("memory-allocated", "result = isinstance(torch.cuda.memory_allocated(), int)"),
    Case("max-memory-allocated", "result = torch.cuda.max_memory_allocated() >= 0"),
    Case("reset-peak-memory-stats", "torch.cuda.reset_peak_memory_stats()\nresult = 1", cpu="result = 1"),
    Case("max-memory-allocated", "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
         "torch.cuda.reset_peak_memory_stats(device)\nresult = torch.cuda.max_memory_allocated(device) >= 0\n"
         "result = result and isinstance(torch.cuda.memory_summary(device=device), str)", cpu="result = True"),
    # torch.accelerator's memory queries raise on the device (no DeviceAllocator): their CPU spelling is the result
    Case("accelerator-empty-cache", "x = torch.arange(3.0)\ntorch.accelerator.empty_cache()\nresult = x - 1",
         cpu="x = torch.arange(3.0)\nresult = x - 1"),
    Case("accelerator-memory-allocated", "result = isinstance(torch.accelerator.memory_allocated(), int)",
         cpu="result = True"),
    Case("accelerator-max-memory-allocated", "result = torch.accelerator.max_memory_allocated() >= 0",
         cpu="result = True"),
    Case("accelerator-reset-peak-memory-stats", "torch.accelerator.reset_peak_memory_stats()\nresult = 1",
         cpu="result = 1"),
    Case("memory-summary", "result = isinstance(torch.cuda.memory_summary(), str)", cpu="result = True"),
    Case("get-device-properties", "props = torch.cuda.get_device_properties(0)\n"
         "result = (isinstance(props.name, str), torch.cuda.get_device_properties(0).total_memory > 0)",
         cpu="result = (True, True)"),
    *(Case(rule, STREAMS, cpu="result = torch.arange(4.0) * 2")
      for rule in ("stream", "stream-context", "current-stream", "default-stream", "set-stream")),
    Case("event", "start = torch.cuda.Event(enable_timing=True)\nend = torch.cuda.Event(enable_timing=True)\n"
         "start.record()\nx = torch.arange(4.0) * 2\nend.record()\nend.synchronize()\n"
         "result = (x, start.elapsed_time(end) >= 0)", cpu="result = (torch.arange(4.0) * 2, True)"),
    Case("cuda-oom", "try:\n    result = torch.arange(3) + 1\nexcept torch.cuda.OutOfMemoryError:\n    result = None"),
    Case("compile-backend", "def f(x):\n    return torch.sin(x) * 2\ng = torch.compile(f)\nresult = g(torch.arange(4.0))",
         rtol=1e-6, traced=False),
    Case("compile-backend-inductor", "def f(x):\n    return torch.cos(x) + 1\n"
         "g = torch.compile(f, backend=\"inductor\")\nresult = g(torch.arange(4.0))", rtol=1e-6, traced=False),
    Case("profiler-cuda", "from torch.profiler import ProfilerActivity, profile\n"
         "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):\n    result = torch.arange(3) * 4"),
    # --- PyTorch/XLA
    Case("xla-device", "import torch_xla.core.xla_model as xm\ndevice = xm.xla_device()\n"
         "result = torch.arange(3.0, device=device) * 2"),
    Case("xla-string", "import torch_xla\nresult = torch.ones(2).to('xla') + 1", cpu="result = torch.ones(2) + 1"),
    Case("xla-init-method", "import torch.distributed as dist\nimport torch_xla.distributed.xla_backend\nimport os\n"
         "os.environ.update(RANK='0', WORLD_SIZE='1', MASTER_ADDR='localhost', MASTER_PORT=str(__import__('neuronkit.distributed.launch', fromlist=['x']).free_port()))\n"
         "dist.init_process_group('xla', init_method='xla://')\nresult = dist.get_world_size()", fresh=True),
    Case("mark-step", "import torch_xla.core.xla_model as xm\nx = torch.arange(3.0)\nfor _ in range(2):\n"
         "    x = x * 2\n    xm.mark_step()\nresult = x"),
    Case("wait-device-ops", "import torch_xla.core.xla_model as xm\nx = torch.arange(3.0) + 2\nxm.wait_device_ops()\nresult = x"),
    Case("optimizer-step", "import torch_xla.core.xla_model as xm\ntorch.manual_seed(0)\nm = torch.nn.Linear(2, 1)\n"
         "opt = torch.optim.SGD(m.parameters(), lr=0.5)\nm(torch.ones(1, 2)).sum().backward()\n"
         "xm.optimizer_step(opt)\nresult = m.weight.detach()"),
    Case("reduce-gradients", "import torch_xla.core.xla_model as xm\ntorch.manual_seed(0)\nm = torch.nn.Linear(2, 1)\n"
         "opt = torch.optim.SGD(m.parameters(), lr=0.5)\nm(torch.ones(1, 2)).sum().backward()\n"
         "xm.reduce_gradients(opt)\nresult = m.weight.grad"),
    Case("master-print", "import torch_xla.core.xla_model as xm\nxm.master_print('loss', 1.5)\nresult = 1"),
    Case("ordinal", "import torch_xla.core.xla_model as xm\nresult = xm.get_ordinal()"),
    Case("local-ordinal", "import torch_xla.core.xla_model as xm\nresult = xm.get_local_ordinal()"),
    Case("world-size", "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
         "result = (xm.xrt_world_size(), xr.world_size())"),
    Case("is-master", "import torch_xla.core.xla_model as xm\nresult = 'master' if xm.is_master_ordinal() else 'other'"),
    Case("rendezvous", "import torch_xla.core.xla_model as xm\nxm.rendezvous('end')\nresult = 1"),
    Case("xla-save", "import io, torch_xla.core.xla_model as xm\nbuffer = io.BytesIO()\n"
         "xm.save({'w': torch.arange(3.0)}, buffer)\nbuffer.seek(0)\nresult = torch.load(buffer)['w']"),
    Case("mp-device-loader", "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.parallel_loader as pl\n"
         "loader = [(torch.ones(2), torch.zeros(1)), (torch.ones(2) * 2, torch.ones(1))]\n"
         "result = [x.sum() + y.sum() for x, y in pl.MpDeviceLoader(loader, xm.xla_device())]"),
    Case("parallel-loader", "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.parallel_loader as pl\n"
         "device = xm.xla_device()\nloader = [{'x': torch.arange(2.0)}]\n"
         "result = [b['x'] * 3 for b in pl.ParallelLoader(loader, [device]).per_device_loader(device)]"),
    Case("add-step-closure", "import torch_xla.core.xla_model as xm\nseen = []\n"
         "xm.add_step_closure(seen.append, args=(torch.arange(2),))\nresult = seen"),
    # a lambda closure (as scripts log with one) is called, not left as an expression that makes it
    Case("add-step-closure", "import torch_xla.core.xla_model as xm\nseen = []\nloss = torch.ones(())\n"
         "xm.add_step_closure(lambda l=loss: seen.append(l.item()))\nresult = seen"),
]


def _same(a: object, b: object, rtol: float) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        a, b = a.detach().cpu(), b.detach().cpu()
        return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=rtol, atol=0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y, rtol) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@dataclass
class Outcome:
    result: object = None
    lines: tuple[int, ...] = ()
    error: BaseException | None = None


def _run(code: str, xla: bool = False, traced: bool = True) -> Outcome:
    """Run a snippet in this process, tracing the lines it executes; with `xla`, torch_xla is the CPU stand-in."""
    lines: list[int] = []

    def trace(frame, event, arg):
        if frame.f_code.co_filename == "<snippet>":
            if event == "line":
                lines.append(frame.f_lineno)
            return trace
        return None

    namespace = {"torch": torch, "__name__": "snippet"}
    outcome = Outcome()
    environment = dict(os.environ)  # a snippet may set variables (CUDA_VISIBLE_DEVICES; dynamo's own)
    added = xla and str(XLA_CPU) not in sys.path
    if added:
        sys.path.insert(0, str(XLA_CPU))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            sys.settrace(trace if traced else None)
            try:
                exec(compile(code, "<snippet>", "exec"), namespace)
            finally:
                sys.settrace(None)
        outcome.result = namespace.get("result")
    except Exception as exc:  # noqa: BLE001 - the outcome
        outcome.error = exc
    finally:
        os.environ.clear()
        os.environ.update(environment)
        if added:
            sys.path.remove(str(XLA_CPU))
            for name in [m for m in sys.modules if m == "torch_xla" or m.startswith("torch_xla.")]:
                del sys.modules[name]
    outcome.lines = tuple(lines)
    return outcome


def _path(lines: tuple[int, ...], scan, removed: bool = False) -> list[int]:
    """The lines a run took, as lines of the original: a rewritten run's without the native helpers the rewrite
    added (their definitions run at import); an original run's without the statements the rewrite removed
    (torch_xla imports, mark_step: comment lines in the rewritten file)."""
    if removed:
        after = scan.rewritten.splitlines()
        gone = {scan.original_line(j + 1) for j, text in enumerate(after) if text.lstrip().startswith("#")
                and (j + 1) not in scan.added_lines}
        return [line for line in lines if line not in gone]
    return [scan.original_line(line) for line in lines if line not in scan.added_lines]


def test_every_rewrite_rule_has_a_case():
    rewrites = {r.id for r in load_rules() if r.category == "rewrite"} - {"xla-import"}  # in every XLA case
    assert rewrites - {c.rule for c in CASES} - set(BY_THE_CORPUS) == set()


# torch.neuron functions whose S form takes its device as an index or a torch.device and raises for a string
# (S torch_neuronx/__init__.py:196-206 set_device, neuron.py:36-53 get_device_name, memory.py:13-25); the
# simulated device's also take a string, so the rewritten snippets run against S's shape.
S_NO_DEVICE_STRING = ("set_device", "get_device_name", "memory_stats", "memory_allocated", "max_memory_allocated",
                      "reset_peak_memory_stats", "memory_summary")


def _as_S_takes_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in S_NO_DEVICE_STRING:
        def strict(*args: object, _call=getattr(torch.neuron, name), _name=name, **kwargs: object) -> object:
            if isinstance(args[0] if args else kwargs.get("device"), str):
                raise TypeError(f"torch.neuron.{_name} takes an index or a torch.device in S, not a string")
            return _call(*args, **kwargs)
        monkeypatch.setattr(torch.neuron, name, strict)


@pytest.mark.parametrize("case", [c for c in CASES if not c.fresh], ids=lambda c: c.rule)
def test_the_rewritten_snippet_gives_the_originals_result(case, monkeypatch):
    scan = scan_source(case.original)
    _as_S_takes_devices(monkeypatch)
    fixed = {f.rule.id for f in scan.findings if f.fixed}
    assert case.rule in fixed, [(f.rule.id, f.fixed) for f in scan.findings]
    assert not re.search(r"^\s*(import|from) torch_xla", scan.rewritten, re.M)
    with torch._dynamo.config.patch(disable=True):  # the original's compile: eager, the values it would give
        original = _run(case.original, xla=case.xla, traced=case.traced)
    ported = _run(scan.rewritten, traced=case.traced)
    assert ported.error is None, f"the rewritten snippet failed: {ported.error!r}\n{scan.rewritten}"
    if original.error is None:
        assert case.cpu is None, "the original ran without CUDA: no CPU spelling needed"
        reference = original
        before, after = _path(original.lines, scan, removed=True), _path(ported.lines, scan)
        if case.rule == "device-guard":  # the guarded branch may now run: it only moves work
            body = {f.line for f in scan.findings if f.rule.id == "device-guard"}
            assert set(after) - set(before) <= set(range(min(body) + 1, max(body) + 3))
            assert set(before) <= set(after)
        else:
            assert after == before, "the rewrite changed the path the script took"
    else:
        assert case.cpu is not None, f"the original failed without CUDA ({original.error!r}): give its CPU spelling"
        reference = _run(case.cpu)
        assert reference.error is None, reference.error
    assert _same(ported.result, reference.result, case.rtol), (ported.result, reference.result)


@pytest.mark.subprocess
@pytest.mark.parametrize("case", [c for c in CASES if c.fresh], ids=lambda c: c.rule)
def test_the_rewritten_process_group_snippet_gives_the_originals_result(case, forked_python):
    """Snippets that make a process group run in a new process each (the device refuses a group once it has
    started, and a process has one default group)."""
    scan = scan_source(case.original)
    assert case.rule in {f.rule.id for f in scan.findings if f.fixed}
    stand_in = f"import sys; sys.path.insert(0, {str(XLA_CPU)!r})\n" if case.xla else ""
    original = forked_python(stand_in + "import torch\n" + (case.cpu or case.snippet) + "\nprint(repr(result))")
    ported = forked_python(scan.rewritten + "\nprint(repr(result))")
    assert ported.stdout.strip().splitlines()[-1] == original.stdout.strip().splitlines()[-1]
