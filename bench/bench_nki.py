"""NKI interpreter cost: an NKI kernel launched eagerly on the simulated `neuron` device against the same
computation as PyTorch ops on `neuron`, same process, calls interleaved (`neuronkit.timing`).

Workloads: SiLU(gate) * up (notebook 08's kernel: one [128, F] tile per SPMD program) and a tiled matmul
through nki.isa (dma_copy, nc_matmul accumulating K tiles in PSUM, tensor_copy).

    python bench/bench_nki.py [--rounds 5] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

import nki  # noqa: I001 - provided by `import torch` (the simulator's autoload)
import nki.isa as nisa
import nki.language as nl
from harness import Run, interleaved_medians


@nki.jit
def silu_mul(gate, up):
    n, f = gate.shape
    out = nl.ndarray((n, f), dtype=gate.dtype, buffer=nl.shared_hbm)
    i_p = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    i_f = nl.arange(f)[None, :]
    rows = i_p < n
    y = nl.multiply(nl.silu(nl.load(gate[i_p, i_f], mask=rows), mask=rows), nl.load(up[i_p, i_f], mask=rows),
                    mask=rows)
    nl.store(out[i_p, i_f], value=y, mask=rows)
    return out


@nki.jit
def matmul(lhsT, rhs):
    k_size, m_size = lhsT.shape
    n_size = rhs.shape[1]
    result = nl.ndarray((m_size, n_size), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // 128):
        for n in nl.affine_range(n_size // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            nisa.dma_copy(dst=result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=nisa.tensor_copy(acc))
    return result


def cases() -> dict[str, dict[str, Callable[[], object]]]:
    g = torch.randn(1024, 512, device="neuron")
    u = torch.randn(1024, 512, device="neuron")
    lhsT = torch.randn(512, 512, device="neuron")
    rhs = torch.randn(512, 1024, device="neuron")
    return {
        "silu(gate) * up, [1024, 512] float32, 8 programs": {
            "torch": lambda: torch.nn.functional.silu(g) * u, "nki": lambda: silu_mul[8](g, u)},
        "matmul [512, 512]ᵀ @ [512, 1024] float32, 32 nc_matmul": {
            "torch": lambda: lhsT.T @ rhs, "nki": lambda: matmul(lhsT, rhs)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    command = f"python bench/bench_nki.py --rounds {args.rounds} --runs {args.runs}"
    with Run("nki", "NKI interpreter", command) as run:
        run.columns(workload="workload", torch_ms=("torch ops on neuron", "{:.2f} ms"),
                    nki_ms=("NKI kernel on neuron", "{:.2f} ms"), ratio=("ratio", "{:.1f}x"))
        run.note = (f"Calls interleaved (`neuronkit.timing.interleaved_medians`), {args.runs} runs per round after 2 "
                    f"warm-up calls, the median over {args.rounds} rounds.")
        for name, arms in cases().items():
            per_round = [interleaved_medians(arms, args.runs, warmup=2) for _ in range(args.rounds)]
            t = statistics.median(r["torch"] for r in per_round)
            k = statistics.median(r["nki"] for r in per_round)
            run.row(workload=name, torch_ms=t, nki_ms=k, ratio=k / t)


if __name__ == "__main__":
    main()
