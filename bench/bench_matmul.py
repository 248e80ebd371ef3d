"""The device's bfloat16 matrix products against CPU's own kernel: time and the largest difference.

A large model's training step multiplies by its weights in three layouts: the forward's `x @ W.T` (the second
operand column-major), the weight gradient's `g.T @ x` (the first column-major) and the input gradient's
`g @ W` (both row-major, where PyTorch's CPU bfloat16 gemm is pathological on a host without AVX-512 BF16). Each
case is timed as CPU's `torch.mm` on bfloat16 tensors and as the simulated device's `mm` (csrc/matmul.cpp: CPU's
kernel where it is fast, else float32 blocks rounded once), on the same host tensors, interleaved medians; the
difference is the largest absolute difference between the two results relative to the largest result (both
accumulate in float32: only the order of the sum differs).

    python bench/bench_matmul.py [--runs 3]
"""

from __future__ import annotations

import argparse

from harness import Run, interleaved_medians

SHAPES = [  # (label, M, K, N, first operand transposed, second operand transposed)
    ("input gradient g @ W, an 8k-row head slice: 16x8192 @ 8192x2048", 16, 8192, 2048, False, False),
    ("input gradient g @ W, a 32k-row slice of the 8B head: 16x32768 @ 32768x4096", 16, 32768, 4096, False, False),
    ("forward x @ W.T, the whole 8B head: 16x4096 @ 4096x128256", 16, 4096, 128256, False, True),
    ("weight gradient g.T @ x, an 8k-row head slice: 8192x16 @ 16x2048", 8192, 16, 2048, True, False),
    ("both transposed: 16x8192 @ 8192x2048", 16, 8192, 2048, True, True),
]


def _operand(rows: int, cols: int, transposed: bool):
    import torch

    return torch.randn(cols, rows, dtype=torch.bfloat16).t() if transposed else torch.randn(rows, cols, dtype=torch.bfloat16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import torch

    from neuronkit.device.simulator import native

    with Run("matmul", "bfloat16 matrix products: CPU's kernel and the device's", "python bench/bench_matmul.py") as run:
        run.columns(shape="shape", cpu_ms=("CPU bf16 mm", "{:.0f} ms"), device_ms=("device mm", "{:.0f} ms"),
                    ratio=("CPU / device", "{:.1f}x"), rel_diff=("largest difference", "{:.1e}"))
        torch.manual_seed(0)
        for label, m, k, n, a_transposed, b_transposed in SHAPES:
            a, b = _operand(m, k, a_transposed), _operand(k, n, b_transposed)
            times = interleaved_medians({"cpu": lambda: torch.mm(a, b), "device": lambda: native.device_mm(a, b)},
                                        runs=args.runs)
            ref, got = torch.mm(a, b).float(), native.device_mm(a, b).float()
            run.row(shape=label, cpu_ms=times["cpu"], device_ms=times["device"], ratio=times["cpu"] / times["device"],
                    rel_diff=float((ref - got).abs().max() / ref.abs().max()))
        run.note = ("Both compute in float32 and round once; the device's float32 blocks stay under 16 MiB each. "
                    "Read the times with the load average.")


if __name__ == "__main__":
    main()
