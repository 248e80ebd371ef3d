// The device's matrix products in bfloat16 and float16, run on the host: `aten::mm`, `addmm`, `bmm`, `baddbmm`.
//
// Trainium's Tensor Engine takes bfloat16/float16 operands and always accumulates and returns in float32 (PSUM);
// the result is rounded to the op's dtype once, when it leaves PSUM (NKI docs, nki.isa.nc_matmul: "The matmul
// accumulation and results are always in float32"); S compiles every NEFF with `--auto-cast=none`
// (torch_neuronx/csrc/core/KernelExecution.cpp:67), so the op's own dtype is what reaches the Tensor Engine, and a
// float32 product stays float32 (CPU's kernel here). This computes the same: the operands widened to float32,
// multiplied and accumulated there, the result (and addmm's bias term) rounded once. CPU's own reduced-precision
// kernels also accumulate in float32, so the numbers are CPU's up to the order of the sum; the reason to run it
// here is time: on a host without AVX-512 BF16, PyTorch 2.13's CPU bfloat16 gemm is 20-90x slower than float32
// when both operands are row-major, which is every large model's `grad_logits @ lm_head.weight` backward
// (16x8192 @ 8192x2048: 7.8 s in bfloat16, 0.35 s here; bench/bench_matmul.py).
//
// The widened copies are made a block at a time (at most kBlock elements each: rows of the result, slices of the
// contraction), so a 128k-vocabulary head costs megabytes of float32, not a float32 copy of its weight.
#include "kernel.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>

namespace neuronkit {
namespace {

constexpr int64_t kBlock = int64_t{1} << 22;  // elements of one float32 block (16 MiB)

bool reduced(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf; }

// out[m, n] = beta * bias[m, n] + alpha * sum_k a[m, k] b[k, n] for 2-D `a`, `b`, `out` (and `bias`, already
// expanded to out's shape, or undefined), in float32 blocks written into `out` (the reduced dtype).
void product_into(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias,
                  const c10::Scalar& beta, const c10::Scalar& alpha) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const int64_t rows = std::clamp<int64_t>(kBlock / std::max<int64_t>(n, 1), 1, std::max<int64_t>(m, 1));
  const int64_t depth = std::clamp<int64_t>(kBlock / std::max<int64_t>(std::max(n, rows), 1), 1,
                                            std::max<int64_t>(k, 1));
  const auto fp32 = at::TensorOptions().dtype(at::kFloat);
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t r = std::min(rows, m - r0);
    at::Tensor acc = at::zeros({r, n}, fp32);
    for (int64_t k0 = 0; k0 < k; k0 += depth) {
      const int64_t d = std::min(depth, k - k0);
      acc.addmm_(a.narrow(0, r0, r).narrow(1, k0, d).to(at::kFloat), b.narrow(0, k0, d).to(at::kFloat));
    }
    if (bias.defined()) {
      if (!alpha.equal(1)) acc.mul_(alpha);
      acc.add_(bias.narrow(0, r0, r).to(at::kFloat), beta);
    } else if (!alpha.equal(1)) {
      acc.mul_(alpha);
    }
    out.narrow(0, r0, r).copy_(acc);
  }
}

// The product of 2-D or 3-D `a` and `b` (bias broadcast to the result, or undefined) in `a`'s dtype: in one float32
// step when each operand and the result fit one block (attention's per-head products, a small model's layers), else
// block by block (per batch entry for 3-D).
at::Tensor product(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  const int64_t result = a.numel() / std::max<int64_t>(a.size(-1), 1) * b.size(-1);
  if (a.numel() <= kBlock && b.numel() <= kBlock && result <= kBlock) {
    at::Tensor acc = at::matmul(a.to(at::kFloat), b.to(at::kFloat));
    if (!alpha.equal(1)) acc.mul_(alpha);
    if (bias.defined()) acc.add_(bias.to(at::kFloat), beta);
    return acc.to(a.scalar_type());
  }
  if (a.dim() == 2) {
    at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
    product_into(out, a, b, bias.defined() ? bias.expand(out.sizes()) : bias, beta, alpha);
    return out;
  }
  at::Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  const at::Tensor full = bias.defined() ? bias.expand(out.sizes()) : bias;
  for (int64_t i = 0; i < a.size(0); ++i) {
    at::Tensor slot = out.select(0, i);
    product_into(slot, a.select(0, i), b.select(0, i), full.defined() ? full.select(0, i) : full, beta, alpha);
  }
  return out;
}

bool row_major(const at::Tensor& t) { return t.stride(-1) == 1; }
bool column_major(const at::Tensor& t) { return t.stride(-2) == 1 && !row_major(t); }

// Whether a call is computed here: both operands (and the bias) in the same reduced dtype, well-formed shapes,
// and a layout CPU's reduced-precision kernel is slow on. CPU's kernel computes the same arithmetic (float32
// accumulation, one rounding) and is fast when exactly one operand is transposed, `x @ W.T` (a forward's
// projections and head) or `g.T @ x` (a weight's gradient), so those run it; anything else (float32, mixed dtypes,
// a shape CPU's kernel refuses) goes to CPU's kernel as it is.
bool ours(const at::Tensor& a, const at::Tensor& b, int64_t dim, const at::Tensor* bias = nullptr) {
  if (!reduced(a) || b.scalar_type() != a.scalar_type() || a.dim() != dim || b.dim() != dim) return false;
  if ((row_major(a) && column_major(b)) || (column_major(a) && row_major(b))) return false;
  if (bias != nullptr && bias->scalar_type() != a.scalar_type()) return false;
  if (a.size(-1) != b.size(-2) || (dim == 3 && a.size(0) != b.size(0))) return false;
  const auto shape = dim == 2 ? std::vector<int64_t>{a.size(0), b.size(1)}
                              : std::vector<int64_t>{a.size(0), a.size(1), b.size(2)};
  return bias == nullptr || at::is_expandable_to(bias->sizes(), shape);  // else CPU's kernel raises its error
}

}  // namespace

at::Tensor device_mm(const at::Tensor& self, const at::Tensor& mat2) {
  return ours(self, mat2, 2) ? product(self, mat2, at::Tensor(), 0, 1) : at::mm(self, mat2);
}

// beta == 0 ignores the bias, NaN included, as CPU's addmm and baddbmm do.
at::Tensor device_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                        const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (!ours(mat1, mat2, 2, &self)) return at::addmm(self, mat1, mat2, beta, alpha);
  return product(mat1, mat2, beta.equal(0) ? at::Tensor() : self, beta, alpha);
}

at::Tensor device_bmm(const at::Tensor& self, const at::Tensor& mat2) {
  return ours(self, mat2, 3) ? product(self, mat2, at::Tensor(), 0, 1) : at::bmm(self, mat2);
}

at::Tensor device_baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                          const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (!ours(batch1, batch2, 3, &self)) return at::baddbmm(self, batch1, batch2, beta, alpha);
  return product(batch1, batch2, beta.equal(0) ? at::Tensor() : self, beta, alpha);
}

void boxed_mm(Stack* stack) {
  auto mat2 = torch::jit::pop(*stack).toTensor();
  auto self = torch::jit::pop(*stack).toTensor();
  torch::jit::push(*stack, device_mm(self, mat2));
}

void boxed_addmm(Stack* stack) {
  auto alpha = torch::jit::pop(*stack).toScalar();
  auto beta = torch::jit::pop(*stack).toScalar();
  auto mat2 = torch::jit::pop(*stack).toTensor();
  auto mat1 = torch::jit::pop(*stack).toTensor();
  auto self = torch::jit::pop(*stack).toTensor();
  torch::jit::push(*stack, device_addmm(self, mat1, mat2, beta, alpha));
}

void boxed_bmm(Stack* stack) {
  auto mat2 = torch::jit::pop(*stack).toTensor();
  auto self = torch::jit::pop(*stack).toTensor();
  torch::jit::push(*stack, device_bmm(self, mat2));
}

void boxed_baddbmm(Stack* stack) {
  auto alpha = torch::jit::pop(*stack).toScalar();
  auto beta = torch::jit::pop(*stack).toScalar();
  auto batch2 = torch::jit::pop(*stack).toTensor();
  auto batch1 = torch::jit::pop(*stack).toTensor();
  auto self = torch::jit::pop(*stack).toTensor();
  torch::jit::push(*stack, device_baddbmm(self, batch1, batch2, beta, alpha));
}

}  // namespace neuronkit
