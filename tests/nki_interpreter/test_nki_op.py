"""`torch_neuronx.nki_op` / `wrap_nki` on the simulated device: the seed's example verbatim (eager,
torch.compile, backward), one compilation per signature, the op audit and the profiler."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

import neuronkit
from neuronkit.nki.hop import nki_kernel_wrapper

SEED_NKI_EXAMPLE = '''
import torch
import nki  # noqa: E402 - the simulator (autoloaded by torch, imported above) provides nki
import nki.language as nl  # noqa: E402
from torch_neuronx import nki_op

@nki.jit
def sin_kernel(in_ptr0, out_ptr):
    input_tile = nl.load(in_ptr0[0:128])
    output_tile = nl.sin(input_tile)
    nl.store(out_ptr[0:128], value=output_tile)
    return out_ptr

@nki_op("mylib::pt_nki_sin", mutates_args={})
def pt_nki_sin(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    sin_kernel(x, out)
    return out

def pt_nki_sin_backward(ctx, grad):
    x, = ctx.saved_tensors
    return grad * pt_nki_cos(x)  # cos is derivative of sin
'''

# What the seed elides ("节选"): the cos op its backward calls, the setup_context, the registration.
SEED_ELIDED = '''
@nki.jit
def cos_kernel(in_ptr0, out_ptr):
    input_tile = nl.load(in_ptr0[0:128])
    output_tile = nl.cos(input_tile)
    nl.store(out_ptr[0:128], value=output_tile)
    return out_ptr

@nki_op("mylib::pt_nki_cos", mutates_args={})
def pt_nki_cos(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    cos_kernel(x, out)
    return out

def setup_context(ctx, inputs, output):
    x, = inputs
    ctx.save_for_backward(x)

pt_nki_sin.register_autograd(pt_nki_sin_backward, setup_context=setup_context)
'''

SEED_CHECKS = '''
from neuronkit.nki.hop import nki_kernel_wrapper
torch.manual_seed(0)
x = torch.randn(128, device="neuron", requires_grad=True)
y = pt_nki_sin(x)
assert y.device.type == "neuron"
torch.testing.assert_close(y.cpu(), torch.sin(x.detach().cpu()))
y.sum().backward()
torch.testing.assert_close(x.grad.cpu(), torch.cos(x.detach().cpu()))

graphs = []
def record(gm, example_inputs):
    graphs.append(gm)
    return torch._dynamo.backends.registry.lookup_backend("neuron")(gm, example_inputs)
compiled = torch.compile(lambda t: pt_nki_sin(t) * 2, backend=record, fullgraph=True)
x2 = torch.randn(128, device="neuron", requires_grad=True)
y2 = compiled(x2)
torch.testing.assert_close(y2.detach().cpu(), 2 * torch.sin(x2.detach().cpu()))
y2.sum().backward()
torch.testing.assert_close(x2.grad.cpu(), 2 * torch.cos(x2.detach().cpu()))
calls = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
assert len(graphs) == 1 and torch.ops.mylib.pt_nki_sin.default in calls, calls
metrics = torch.neuron.get_dynamo_metrics()
assert [m["kind"] for m in metrics] == ["forward", "backward"] and not any(m["fallback_ops"] for m in metrics)
print("SEED-OK")
'''


@pytest.mark.subprocess
def test_seed_nki_example_runs_verbatim_eager_compiled_and_backward(forked_python):
    # in a process of its own (its op names are process-wide), a fork that installs the device
    proc = forked_python(SEED_NKI_EXAMPLE + SEED_ELIDED + SEED_CHECKS)
    assert "SEED-OK" in proc.stdout


# ---------------------------------------------------------------------------------------------------
# In-process: kernels and ops defined once per test module (op names are process-wide).

import nki  # noqa: E402 - the simulator (autoloaded by torch, imported above) provides nki
import nki.language as nl  # noqa: E402
from torch_neuronx import nki_op, wrap_nki  # noqa: E402


@nki.jit
def add_kernel(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    nl.store(c_output[ix, iy], value=nl.load(a_input[ix, iy]) + nl.load(b_input[ix, iy]))
    return c_output


@nki.jit
def scale_kernel(x, y, scale):
    nl.store(y[0:128], value=nl.load(x[0:128]) * scale)
    return y


@nki_op("nktest::add", mutates_args={})
def nki_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return wrap_nki(add_kernel)[a.shape[0] // 128, a.shape[1] // 512](a, b)


@nki_op("nktest::scale_into", mutates_args={"y"})
def nki_scale_into(x: torch.Tensor, y: torch.Tensor, scale: float) -> None:
    wrap_nki(scale_kernel)(x, y, scale)


class AddModel(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return nki_add(a * 2, b)


def _forward_graph(fn, *args):
    graphs = []

    def fw(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    out = torch.compile(fn, backend=aot_autograd(fw_compiler=fw), fullgraph=True)(*args)
    return out, graphs[0]


def test_spmd_kernel_through_nki_op_eager_and_compiled(fresh_dynamo):
    a = torch.rand(256, 1024, device="neuron")
    b = torch.rand(256, 1024, device="neuron")
    torch.testing.assert_close(nki_add(a, b).cpu(), (a + b).cpu())
    compiled = torch.compile(AddModel(), backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(a, b).cpu(), (a * 2 + b).cpu())
    _, graph = _forward_graph(AddModel(), a, b)
    kernels = [n for n in graph.graph.nodes if n.target is nki_kernel_wrapper]
    assert len(kernels) == 1 and kernels[0].kwargs["grid"] == (2, 2)


def test_mutating_op_updates_its_argument_eager_and_compiled(fresh_dynamo):
    x = torch.randn(128, device="neuron")
    y = torch.zeros(128, device="neuron")
    nki_scale_into(x, y, 3.0)
    torch.testing.assert_close(y.cpu(), 3.0 * x.cpu())

    def step(x, y):
        nki_scale_into(x, y, 0.5)
        return y + 1

    y2 = torch.zeros(128, device="neuron")
    out = torch.compile(step, backend="neuron", fullgraph=True)(x, y2)
    torch.testing.assert_close(y2.cpu(), 0.5 * x.cpu())
    torch.testing.assert_close(out.cpu(), 0.5 * x.cpu() + 1)


def test_one_compilation_per_shape_dtype_and_constant():
    stats = torch.neuron.neff_cache_stats
    x = torch.randn(128, device="neuron")

    def entries_after(*calls):
        before = stats()["entries"]
        for scale, dtype in calls:
            scale_kernel(x.to(dtype), torch.empty(128, device="neuron", dtype=dtype), scale)
        return stats()["entries"] - before

    before_hits = stats()["hits"]
    assert entries_after((1.25, torch.float32), (1.25, torch.float32)) == 1
    assert stats()["hits"] > before_hits
    assert entries_after((1.25, torch.float32)) == 0
    assert entries_after((2.5, torch.float32)) == 1  # a constant argument is compiled in
    assert entries_after((2.5, torch.bfloat16)) == 1


def test_kernel_launch_counts_as_executed_device_op():
    import torch_neuronx

    torch_neuronx.clear_op_tracking()
    nki_add(torch.rand(128, 512, device="neuron"), torch.rand(128, 512, device="neuron"))
    assert "nki::add_kernel" in torch_neuronx.get_executed_ops()
    assert not any("nki" in op for op in torch_neuronx.get_fallback_ops())


def test_audit_lists_custom_nki_ops_as_native():
    report = neuronkit.audit(AddModel(), (torch.rand(128, 512), torch.rand(128, 512)))
    assert report.summary.nki_ops == ["nktest::add"]
    row = report.op("nktest::add")
    assert row.classification == "native" and row.calls == 1
    assert not report.findings_in("cpu_fallback")


def test_profiler_shows_kernel_as_device_op():
    from neuronkit import profiling

    a, b = torch.rand(128, 512, device="neuron"), torch.rand(128, 512, device="neuron")
    summary = profiling.profile(AddModel(), (a, b), steps=2, warmup=3)
    row = summary[summary["name"] == "nki::add_kernel"]
    assert len(row) == 1 and row["classification"].iloc[0] == "native"
    assert row["calls"].iloc[0] == 2 and row["device_time_us"].iloc[0] > 0


def test_wrap_nki_called_directly_in_a_compiled_function(fresh_dynamo):
    wrapped = wrap_nki(add_kernel)

    def step(a, b):
        return wrapped[1, 1](a * 2, b) + 1

    a, b = torch.rand(128, 512, device="neuron"), torch.rand(128, 512, device="neuron")
    torch.testing.assert_close(torch.compile(step, backend="neuron")(a, b).cpu(), (a * 2 + b + 1).cpu())
    _, graph = _forward_graph(step, a, b)
    assert [n.target for n in graph.graph.nodes].count(nki_kernel_wrapper) == 1


def test_report_lists_custom_nki_ops(tmp_path):
    from neuronkit.reporting import report as render_report
    from neuronkit.pipeline.record import RunDir, StageResult

    audit = neuronkit.audit(AddModel(), (torch.rand(128, 512), torch.rand(128, 512)))
    run = RunDir(tmp_path)
    run.write(StageResult("audit", "pass", "audited", evidence=audit.to_dict()))
    run.write_params({"model": "AddModel", "dtype": "float32"})
    html = render_report(tmp_path).html.read_text(encoding="utf-8")
    assert "<dt>Custom NKI ops</dt>" in html and "nktest::add" in html
    assert "<th data-type=\"num\" class=\"num\">NKI engine time per call, µs (estimate)</th>" in html


def test_kernel_arguments_on_two_devices_are_refused():
    with pytest.raises(RuntimeError, match="found at least two devices, neuron:0 and cpu"):
        scale_kernel(torch.randn(128, device="neuron"), torch.empty(128), 2.0)


def test_audit_records_a_wrap_nki_kernel_launch_as_a_native_device_op():
    class Direct(nn.Module):
        def forward(self, a, b):
            return wrap_nki(add_kernel)[1, 1](a, b) * 2

    report = neuronkit.audit(Direct(), (torch.rand(128, 512), torch.rand(128, 512)))
    assert report.summary.nki_ops == ["nki::add_kernel"]
    assert report.op("nki::add_kernel").classification == "native"
