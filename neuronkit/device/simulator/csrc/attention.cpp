// The device's fused-attention kernel, forward and backward, run on the host where CPU's flash kernel would
// otherwise run: `aten::_scaled_dot_product_fused_attention_overrideable[_backward]`, SDPA's device kernel for
// 4-D inputs with no mask, a causal mask, or any boolean/additive mask (S = parmoham-aws/test-repo-parmoham
// @ 98154b8: csrc/aten/SdpBackendSelection.cpp:35-47; the decomposition it lowers,
// python_ops/torch_mlir/ops/scaled_dot_product_attention.py::compute_attention, backward at :229).
// In C++ rather than Python because it runs twice per layer: as Python functions its ~25 host ops cost
// more than the attention itself on a small model.
#include "kernel.h"

#include "runtime.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace neuronkit {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// exp() of a float32 below about -87 underflows to a denormal or zero, which the host's vectorized exp
// computes 20-80x slower than a normal value (measured: 65k masked logits, 300-1300 us against 15 us).
// Those exponentials are below 2.8e-38, beyond float32's resolution next to the row's largest (exp(0) = 1),
// so they are clamped before exp and zeroed after: the same probabilities, at the normal speed.
constexpr double kExpFloor = -87.0;
const double kExpZeroBelow = std::exp(-86.5);

// exp(x) in place, with the exponentials of x < -86.5 (underflow) set to zero.
at::Tensor floored_exp_(at::Tensor x) { return at::threshold_(x.clamp_min_(kExpFloor).exp_(), kExpZeroBelow, 0.0); }

// -inf where `allowed` is false, 0 elsewhere: a mask as an additive bias of the mask's own (small) shape,
// so applying it is one broadcast add (x + 0 is x; x + -inf is -inf: the same logits as a masked fill).
at::Tensor additive(const at::Tensor& allowed) {
  return at::zeros(allowed.sizes(), at::TensorOptions().dtype(at::kFloat)).masked_fill_(allowed.logical_not(), kNegInf);
}

// at::matmul(a, b) of two 4-D tensors with the same batch dimensions, computed as at::matmul computes it (each
// reshaped to (batch, rows, columns), one bmm, the result viewed back) without its no-op expansions and its
// dispatch: the same bmm on the same operands, so the same bits. Other shapes take at::matmul.
at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() != 4 || b.dim() != 4 || a.size(0) != b.size(0) || a.size(1) != b.size(1)) return at::matmul(a, b);
  const int64_t batch = a.size(0) * a.size(1);
  return at::bmm(a.reshape({batch, a.size(2), a.size(3)}), b.reshape({batch, b.size(2), b.size(3)}))
      .view({a.size(0), a.size(1), a.size(2), b.size(3)});
}

// The causal mask as an additive bias, (query length, key length): 0 on and below the diagonal, -inf above. Kept
// per thread for the few shapes a model runs (a decoder calls it twice per layer with the same lengths); only
// read (added to the logits), never written or returned. Large masks are built each call rather than held.
at::Tensor causal_bias(int64_t rows, int64_t cols) {
  constexpr int64_t kMaxCachedElements = int64_t{1} << 20;  // 4 MiB of float32
  constexpr size_t kMaxCached = 8;
  const auto build = [&] {
    c10::InferenceMode normal(false);  // an ordinary tensor whichever mode the first call ran in
    return additive(at::ones({rows, cols}, at::TensorOptions().dtype(at::kBool)).tril_());
  };
  if (rows * cols > kMaxCachedElements) return build();
  thread_local std::vector<std::pair<std::pair<int64_t, int64_t>, at::Tensor>> cached;
  for (const auto& [shape, bias] : cached) {
    if (shape.first == rows && shape.second == cols) return bias;
  }
  if (cached.size() >= kMaxCached) cached.erase(cached.begin());
  cached.emplace_back(std::make_pair(rows, cols), build());
  return cached.back().second;
}

// Scaled logits in float32 with the causal mask or the additive bias: causal wins over a bias; a boolean
// bias is an allow-mask.
at::Tensor logits_of(const at::Tensor& query, const at::Tensor& key, const std::optional<at::Tensor>& bias,
                     bool is_causal, double scale) {
  auto logits = batched_matmul(query, key.transpose(-2, -1));
  logits = logits.scalar_type() == at::kFloat ? logits.mul_(scale) : logits.to(at::kFloat).mul_(scale);
  if (is_causal) return logits.add_(causal_bias(query.size(-2), key.size(-2)));
  if (bias && bias->defined() && bias->numel() > 0) {
    return bias->scalar_type() == at::kBool ? logits + additive(*bias) : logits + bias->to(at::kFloat);
  }
  return logits;
}

// The forward softmax as S computes it (compute_attention, python_ops/torch_mlir/ops/
// scaled_dot_product_attention.py:67-72: the row maximum out, exp, the sum, probabilities as exp / sum,
// lse = max + log(sum)), in place over `logits`; returns (probabilities, lse). A row with every key masked (a
// pad position of a left-padded batch) has max -inf, so exp(-inf - -inf) makes it NaN, as on the device:
// S has no guard there (PyTorch's `_safe_softmax` gives zeros), and the NaN output rows reach the real
// tokens at the next layer (0 x NaN). NaN passes the clamp and the threshold of `floored_exp_` unchanged.
std::pair<at::Tensor, at::Tensor> softmax_and_lse(at::Tensor logits) {
  auto max = at::amax(logits, {-1}, /*keepdim=*/true);
  auto exp = floored_exp_(logits.sub_(max));
  auto sum = exp.sum(-1, /*keepdim=*/true);
  auto lse = (max + at::log(sum)).squeeze(-1);
  return {exp.div_(sum), lse};
}

// The backward's probabilities from the forward's lse (S compute_attention_backward: exp(logits - lse)),
// in place over `logits`; NaN for a fully masked row, whose lse is NaN.
at::Tensor probabilities(at::Tensor logits, const at::Tensor& lse) {
  return floored_exp_(logits.sub_(lse.unsqueeze(-1)));
}

// `values` in `layout`'s dtype and memory layout, as the op's meta kernel promises (a traced graph views
// the output on that assumption).
at::Tensor like(const at::Tensor& layout, const at::Tensor& values) { return at::empty_like(layout).copy_(values); }

// The forward's output: (..., query length, value head size) in the query's dtype and dimension order, as the
// op's meta kernel allocates it (torch/_meta_registrations.py `alloc_with_matching_layout`); the value's head
// size may differ from the query's (multi-head latent attention: DeepSeek-V3's 192-wide queries, 128-wide values).
at::Tensor output_like(const at::Tensor& query, const at::Tensor& values) {
  if (values.sizes() == query.sizes()) return like(query, values);
  std::vector<int64_t> order(query.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::vector<int64_t> sizes, inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    sizes.push_back(values.size(order[i]));
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  return at::empty(sizes, query.options()).permute(inverse).copy_(values);
}

double scale_of(const at::Tensor& query, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

at::Tensor empty(at::ScalarType dtype) { return at::empty({0}, at::TensorOptions().dtype(dtype)); }

// Fewer key/value heads than query heads (multi-query or grouped-query attention, with or without
// `enable_gqa`) are repeated to the query's, as S's kernel does (scaled_dot_product_attention.py:147-151).
at::Tensor heads_like(const at::Tensor& query, const at::Tensor& kv) {
  auto groups = query.size(1) / kv.size(1);
  if (groups <= 1 || query.size(1) == kv.size(1)) return kv;
  // kv.repeat_interleave(groups, 1) as one copy: each head's values `groups` times in a row, contiguous.
  return kv.unsqueeze(2).expand({kv.size(0), kv.size(1), groups, kv.size(2), kv.size(3)})
      .reshape({kv.size(0), kv.size(1) * groups, kv.size(2), kv.size(3)});
}

// The gradient of repeated heads, summed back onto each key/value head (S: :382-389).
at::Tensor per_kv_head(const at::Tensor& grad, const at::Tensor& kv) {
  if (grad.size(1) == kv.size(1)) return grad;
  return grad.view({grad.size(0), kv.size(1), grad.size(1) / kv.size(1), grad.size(2), grad.size(3)}).sum(2);
}

}  // namespace

FusedAttention fused_attention(const at::Tensor& query, const at::Tensor& key_in, const at::Tensor& value_in,
                               const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                               bool return_debug_mask, std::optional<double> scale) {
  auto key = heads_like(query, key_in);
  auto value = heads_like(query, value_in);
  auto [probs, lse] = softmax_and_lse(logits_of(query, key, attn_bias, is_causal, scale_of(query, scale)));
  if (dropout_p > 0.0) {
    probs = at::dropout(probs, dropout_p, /*train=*/true);
  }
  auto output = output_like(query, batched_matmul(probs.to(query.scalar_type()), value));
  auto cum = empty(at::kInt);
  return {output, lse, cum, cum.clone(), query.size(-2), key.size(-2), empty(at::kLong), empty(at::kLong),
          empty(query.scalar_type())};
}

FusedAttentionGrads fused_attention_backward(const at::Tensor& grad_out, const at::Tensor& query,
                                             const at::Tensor& key_in, const at::Tensor& value_in,
                                             const at::Tensor& attn_bias, const at::Tensor& logsumexp,
                                             bool is_causal, std::optional<double> scale) {
  auto key = heads_like(query, key_in);
  auto value = heads_like(query, value_in);
  double s = scale_of(query, scale);
  auto probs = probabilities(logits_of(query, key, attn_bias, is_causal, s), logsumexp);
  auto grad = grad_out.to(at::kFloat);
  auto grad_value = batched_matmul(probs.transpose(-2, -1), grad);
  auto grad_probs = batched_matmul(grad, value.to(at::kFloat).transpose(-2, -1));
  auto grad_logits = probs * (grad_probs - (grad_probs * probs).sum(-1, /*keepdim=*/true));
  auto grad_query = batched_matmul(grad_logits, key.to(at::kFloat)) * s;
  auto grad_key = batched_matmul(grad_logits.transpose(-2, -1), query.to(at::kFloat)) * s;
  at::Tensor grad_bias;
  if (attn_bias.defined() && attn_bias.numel() > 0 && at::isFloatingType(attn_bias.scalar_type()) && !is_causal) {
    grad_bias = grad_logits.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  } else {
    grad_bias = empty(query.scalar_type());
  }
  return {like(query, grad_query), like(key_in, per_kv_head(grad_key, key_in)),
          like(value_in, per_kv_head(grad_value, value_in)), grad_bias};
}

void boxed_fused_attention(Stack* stack) {
  auto a = torch::jit::pop(*stack, 8);
  auto r = fused_attention(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toOptional<at::Tensor>(),
                           a[4].toDouble(), a[5].toBool(), a[6].toBool(), a[7].toOptional<double>());
  torch::jit::push(*stack, std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r), c10::SymInt(std::get<4>(r)),
                   c10::SymInt(std::get<5>(r)), std::get<6>(r), std::get<7>(r), std::get<8>(r));
}

void boxed_fused_attention_backward(Stack* stack) {
  // (grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k, max_q,
  //  max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale)
  auto a = torch::jit::pop(*stack, 17);
  auto r = fused_attention_backward(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(),
                                    a[4].isNone() ? at::Tensor() : a[4].toTensor(), a[7].toTensor(), a[13].toBool(), a[16].toOptional<double>());
  torch::jit::push(*stack, std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r));
}

namespace {

// SDPA on the device, as the real backend's `_fused_sdp_choice` picks it (csrc/aten/SdpBackendSelection.cpp:35-47):
// 4-D neuron inputs go to the fused overrideable kernel (any boolean or additive mask, forward and backward; fewer
// KV heads than query heads are repeated inside it, with or without `enable_gqa`); other ranks decompose into the
// math path (SDPA's CompositeImplicitAutograd kernel). With dropout the simulator takes the math path too, whose
// backward replays the forward's dropout mask (docs/fidelity.md). Registered for PrivateUse1 and its autograd key;
// in C++ because a decoder calls it once per layer and the Python router cost about as much as a small op's host
// work.
void sdpa_router(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  // (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
  auto args = torch::jit::last(*stack, 8);
  const auto& query = args[0].toTensor();
  const auto& key = args[1].toTensor();
  const auto& value = args[2].toTensor();
  const double dropout_p = args[4].toDouble();
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4 || query.device().type() != kNeuron || dropout_p > 0) {
    return op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
  }
  auto out = at::_ops::_scaled_dot_product_fused_attention_overrideable::call(
      query, key, value, args[3].toOptional<at::Tensor>(), dropout_p, args[5].toBool(), /*return_debug_mask=*/false,
      args[6].toOptional<double>());
  torch::jit::drop(*stack, 8);
  torch::jit::push(*stack, std::move(std::get<0>(out)));
}

}  // namespace

void install_sdpa_router() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto key : {c10::DispatchKey::AutogradPrivateUse1, c10::DispatchKey::PrivateUse1}) {
      auto* lib = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);  // lives as the process
      lib->impl("scaled_dot_product_attention", torch::CppFunction::makeFromBoxedFunction<&sdpa_router>());
    }
  });
}

}  // namespace neuronkit
