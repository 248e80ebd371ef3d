// The per-op kernel (kernel.cpp): installation, and the records Python reads (op tracking, NEFF-cache hits).
#pragma once

#include "call_rules.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace neuronkit {

using Stack = std::vector<c10::IValue>;

// Register the boxed kernel for PrivateUse1: as the fallback of every op, and by name for `overloads`.
// `describe(qualified)` gives an overload's record (kernel.py NativeRecord, read by field name);
// `slow(qualified, values)` runs the Python path.
void install_kernel(py::object describe, py::object slow, const std::vector<std::string>& overloads,
                    const std::string& init_error);

// ATen overloads with a CompositeExplicitAutograd ("E" prefix) or only a non-functional one ("N"), and no
// CompositeImplicitAutograd kernel: the ones that outrank a backend fallback.
std::vector<std::string> composite_explicit_overloads();

// Op tracking (torch_neuronx.get_executed_ops / get_fallback_ops): the one record, kept here.
void record_op(const std::string& name, bool fallback);
std::vector<std::string> tracked_ops(bool fallback);
void clear_tracking();

// NEFF-cache hits the fast path counted on signatures Python compiled first.
uint64_t neff_hits();
void neff_forget();

// attention.cpp: the device's fused SDPA kernel on host tensors, plain and boxed (stack in schema order).
using FusedAttention = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, at::Tensor,
                                  at::Tensor, at::Tensor>;
using FusedAttentionGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
FusedAttention fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                               const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                               bool return_debug_mask, std::optional<double> scale);
FusedAttentionGrads fused_attention_backward(const at::Tensor& grad_out, const at::Tensor& query,
                                             const at::Tensor& key, const at::Tensor& value,
                                             const at::Tensor& attn_bias, const at::Tensor& logsumexp,
                                             bool is_causal, std::optional<double> scale);
void boxed_fused_attention(Stack* stack);
// Register SDPA's backend choice for PrivateUse1 and AutogradPrivateUse1: the fused kernel for 4-D device inputs
// without dropout, SDPA's math decomposition otherwise (once per process).
void install_sdpa_router();
void boxed_fused_attention_backward(Stack* stack);

// matmul.cpp: the device's mm, addmm, bmm and baddbmm on host tensors (bfloat16/float16 accumulated in float32 and
// rounded once, as the Tensor Engine does; other dtypes run CPU's kernel), plain and boxed.
at::Tensor device_mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor device_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                        const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor device_bmm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor device_baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                          const c10::Scalar& beta, const c10::Scalar& alpha);
void boxed_mm(Stack* stack);
void boxed_addmm(Stack* stack);
void boxed_bmm(Stack* stack);
void boxed_baddbmm(Stack* stack);

// bindings.cpp: does rule `name` fire on a call of `qualified` (`aten::clone`, `aten::add.Tensor`) whose
// arguments are `call` (by schema name; a missing one takes the schema's default)? For Python.
bool call_rule(const std::string& name, const std::string& qualified, const py::dict& call);

// kernel.py's Python path, one call, with the native path's mechanics (kernel.cpp): built from the call's
// host values in schema order, it gives the call's NEFF key (bytes, None when nothing compiles), the arguments
// 64-bit narrowed as the device computes them, and the result restored (written arguments get theirs back).
class PythonCall {
 public:
  PythonCall(const std::string& qualified, const py::list& values);
  ~PythonCall();
  py::object key() const;
  py::list narrowed(const py::list& values);
  py::object restored(const py::object& result);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A Python-path call's result on the device: fresh tensors wrapped on core `target` (None: the host), an
// aliasing result as the same view of (or, written, the very) device argument in `values`.
py::object device_results(const std::string& qualified, const py::object& result, const py::list& values,
                          std::optional<int> target);

// Calls that took the Python path so far, per overload (`aten::add.Tensor`): what still costs Python.
std::unordered_map<std::string, uint64_t> slow_calls();

// Send every op to the Python path while `reason` (a bit) is on: observers, a compiled graph, a bounded cache.
void route_to_python(int reason, bool on);

}  // namespace neuronkit
