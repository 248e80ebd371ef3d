"""An NKI kernel's ESTIMATED engine time (neuronkit/nki/cost.py): charged per instruction with the NKI ISA
reference's cost formulas, shown beside the host time in the audit, the profiler (table, Parquet, trace)
and the report, for a kernel called eagerly, under torch.compile and in backward."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn

import neuronkit
from neuronkit.nki.cost import figures

import nki  # noqa: E402 - the simulator (autoloaded by torch, imported above) provides nki
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from torch_neuronx import nki_op  # noqa: E402


@nki.jit
def double_exp_kernel(x):
    """exp(x + x) in today's API: DMA in, a Vector Engine add, a Scalar Engine exp, DMA out."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    summed = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=summed, data1=tile, data2=tile, op=nl.add)
    nisa.activation(dst=tile, op=nl.exp, data=summed)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def matmul_kernel(a_t, b):
    """a_tᵀ @ b on the Tensor Engine: [K, M]ᵀ @ [K, N] into PSUM, copied to SBUF, then to HBM."""
    out = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    stationary = nl.ndarray(a_t.shape, dtype=a_t.dtype, buffer=nl.sbuf)
    moving = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=stationary, src=a_t)
    nisa.dma_copy(dst=moving, src=b)
    acc = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)
    result = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result, src=acc)
    nisa.dma_copy(dst=out, src=result)
    return out


@nki_op("nkcost::double_exp", mutates_args={})
def double_exp(x: torch.Tensor) -> torch.Tensor:
    return double_exp_kernel(x)


@nki_op("nkcost::double_exp_grad", mutates_args={})
def double_exp_grad(x: torch.Tensor) -> torch.Tensor:
    return double_exp_kernel(x)  # d/dx exp(2x) = 2 exp(2x): the backward launches the kernel again


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


double_exp.register_autograd(lambda ctx, grad: grad * 2 * double_exp_grad(ctx.saved_tensors[0]),
                             setup_context=_setup)


@nki_op("nkcost::matmul", mutates_args={})
def nki_matmul(a_t: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return matmul_kernel(a_t, b)


class DoubleExp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((128, 512), 0.01))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return double_exp(x * self.w)


def _us(cycles: float, engine: str) -> float:
    return cycles / figures().clock_ghz[engine] / 1000


def _dma_us(nbytes: int) -> float:
    return nbytes / figures().dma_bytes_per_s * 1e6


def test_estimate_follows_the_isa_cost_formulas_per_engine():
    """The NKI ISA reference: tensor_tensor max(MIN_II, 2N) Vector cycles, activation max(MIN_II, N) Scalar
    cycles, nc_matmul max(min(64, N_stationary), N_moving) Tensor cycles (bfloat16), tensor_copy
    max(MIN_II, N); DMA by bytes. The kernel's estimate: the busiest compute engine plus DMA."""
    class Both(nn.Module):
        def forward(self, x, a_t, b):
            return double_exp(x), nki_matmul(a_t, b)

    x = torch.rand(128, 512)
    a_t, b = torch.rand(128, 128, dtype=torch.bfloat16), torch.rand(128, 512, dtype=torch.bfloat16)
    report = neuronkit.audit(Both(), (x, a_t, b))
    n, min_ii = 512, figures().min_ii

    row = report.op("nkcost::double_exp")
    engines = row.nki_engine_us
    assert engines["vector"] == pytest.approx(_us(max(min_ii, 2 * n), "vector"), rel=1e-3)
    assert engines["scalar"] == pytest.approx(_us(max(min_ii, n), "scalar"), rel=1e-3)
    assert engines["tensor"] == engines["gpsimd"] == 0
    assert engines["dma"] == pytest.approx(_dma_us(2 * x.numel() * 4), rel=1e-3)
    assert row.nki_est_us == pytest.approx(max(engines["vector"], engines["scalar"]) + engines["dma"], rel=1e-3)

    engines = report.op("nkcost::matmul").nki_engine_us
    assert engines["tensor"] == pytest.approx(_us(max(min(64, 128), 512), "tensor"), rel=1e-3)
    assert engines["vector"] == pytest.approx(_us(max(min_ii, 512), "vector"), rel=1e-3)
    assert engines["dma"] == pytest.approx(_dma_us(a_t.numel() * 2 + b.numel() * 2 + 128 * 512 * 4), rel=1e-3)


def test_float32_matmul_streams_at_a_quarter_of_the_rate():
    class Mm(nn.Module):
        def forward(self, a_t, b):
            return nki_matmul(a_t, b)

    bf16 = neuronkit.audit(Mm(), (torch.rand(128, 64, dtype=torch.bfloat16), torch.rand(128, 256, dtype=torch.bfloat16)))
    fp32 = neuronkit.audit(Mm(), (torch.rand(128, 64), torch.rand(128, 256)))
    tensor_bf16 = bf16.op("nkcost::matmul").nki_engine_us["tensor"]
    assert tensor_bf16 == pytest.approx(_us(256, "tensor"), rel=1e-3)
    assert fp32.op("nkcost::matmul").nki_engine_us["tensor"] == pytest.approx(4 * tensor_bf16, rel=1e-3)


def test_backward_nki_op_is_audited_with_its_estimate():
    report = neuronkit.audit(DoubleExp(), torch.rand(128, 512), backward=True)
    forward, backward = report.op("nkcost::double_exp"), report.op("nkcost::double_exp_grad")
    assert report.summary.nki_ops == ["nkcost::double_exp", "nkcost::double_exp_grad"]
    assert backward.nki_est_us == pytest.approx(forward.nki_est_us) and backward.nki_est_us > 0


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_profiler_shows_the_estimate_beside_the_host_time(compiled, fresh_dynamo, tmp_path):
    from neuronkit import profiling

    model = DoubleExp().to("neuron")
    if compiled:  # the module's forward compiled (compiling the module itself trips on the profiler's hooks)
        model.forward = torch.compile(model.forward, backend="neuron", fullgraph=True)
    summary = profiling.profile(model, torch.rand(128, 512, device="neuron"), steps=2, warmup=3,
                                output_dir=tmp_path)
    kernel = summary[summary["name"] == "nki::double_exp_kernel"].iloc[0]
    per_launch = neuronkit.audit(DoubleExp(), torch.rand(128, 512)).op("nkcost::double_exp")
    assert kernel["calls"] == 2
    assert kernel["nki_est_us"] == pytest.approx(2 * per_launch.nki_est_us, rel=1e-3)
    assert kernel["device_time_us"] > 0  # the interpreter's host time, reported apart from the estimate
    assert summary[summary["name"] != "nki::double_exp_kernel"]["nki_est_us"].isna().all()
    trace = json.loads(open(summary.attrs["trace_path"]).read())
    launches = [e for e in trace["traceEvents"] if e.get("name") == "nc_exec[nki::double_exp_kernel]"]
    estimate = launches[0]["args"]["nki_engine_time (estimate)"]
    assert estimate["estimate_us"] == pytest.approx(per_launch.nki_est_us, rel=1e-3)
    assert estimate["rule"].startswith("max over the compute engines + DMA")
    assert "not documented" in estimate["not_modelled"]


def test_report_shows_the_estimate_as_a_number_with_its_unit(tmp_path):
    from neuronkit.reporting import report as render_report
    from neuronkit.pipeline.record import RunDir, StageResult

    top_ops = [{"name": "nki::double_exp_kernel", "calls": 2, "device_time_us": 25000.0, "cpu_time_us": 26000.0,
                "classification": "native", "est_trn2_us": 2.2, "bound": "memory", "nki_est_us": 5.5},
               {"name": "aten::mul", "calls": 2, "device_time_us": 900.0, "cpu_time_us": 950.0,
                "classification": "native", "est_trn2_us": 1.4, "bound": "memory", "nki_est_us": None}]
    run = RunDir(tmp_path)
    run.write(StageResult("profile", "pass", "profiled", evidence={"top_ops": top_ops}))
    run.write_params({"model": "DoubleExp", "dtype": "float32"})
    paths = render_report(tmp_path)
    html = paths.html.read_text(encoding="utf-8")
    assert "<th>NKI engine time (estimate)</th>" in html and "NKI kernels (estimate)" in html
    tiles = json.loads(paths.json.read_text(encoding="utf-8"))["key_numbers"]
    tile = next(t for t in tiles if t["label"] == "NKI kernels (estimate)")
    assert (tile["number"], tile["unit"]) == (5.5, "µs") and tile["clock"] == "estimate"
    assert "host" not in tile["note"]  # the headline carries no host timing; the profile card has the host times
