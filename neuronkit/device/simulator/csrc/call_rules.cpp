// The input-aware policy rules (data/op_support.toml `call_rule`): whether one call of an op uses a feature
// the device treats differently. Each reads one named argument of the call. This is their only definition:
// the per-op kernel (kernel.cpp) tests them on the dispatcher stack, and Python (the kernel's slow path that
// builds the error, the op audit) calls the same predicates through the binding `call_rule`.
// S = the pre-release source parmoham-aws/test-repo-parmoham.
#include "call_rules.h"

#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <array>

namespace neuronkit {
namespace {

struct CallRule {
  const char* name;
  const char* argument;  // the schema argument the rule reads
  bool (*fires)(const c10::IValue& value);
};

// `embedding(..., sparse=True)` / `embedding_bag(..., sparse=True)`: the gradient will be sparse.
bool sparse_flag(const c10::IValue& v) { return v.isBool() && v.toBool(); }

// `_native_multi_head_attention` with a mask tensor (S: python_ops/native_multi_head_attention.py:77-82).
bool mha_mask(const c10::IValue& v) { return !v.isNone(); }

// `_native_multi_head_attention` asked for attention weights (S: native_multi_head_attention.py:84-88,
// 128-134); the schema's default is True.
bool mha_need_weights(const c10::IValue& v) { return !v.isBool() || v.toBool(); }

// A channels_last memory format (S: python_ops/cast_policy.py:38-50, validate_neuron_memory_format).
bool channels_last(const c10::IValue& v) {
  if (!v.isInt()) return false;
  auto format = static_cast<c10::MemoryFormat>(v.toInt());
  return format == c10::MemoryFormat::ChannelsLast || format == c10::MemoryFormat::ChannelsLast3d;
}

// SDPA's device kernel with a query it does not take: S's AttentionOpImpl.can_handle wants float32, float16 or
// bfloat16 (python_ops/base.py:976-977; the torch-mlir impl asks the same, torch_mlir/ops/
// scaled_dot_product_attention.py:97-127), and the CPU fallback has no kernel for the overrideable op.
bool sdpa_dtype(const c10::IValue& v) {
  if (!v.isTensor()) return false;
  auto dtype = v.toTensor().scalar_type();
  return dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16;
}

constexpr std::array<CallRule, 5> kRules{{
    {"sparse_flag", "sparse", &sparse_flag},
    {"mha_mask", "mask", &mha_mask},
    {"mha_need_weights", "need_weights", &mha_need_weights},
    {"channels_last", "memory_format", &channels_last},
    {"sdpa_dtype", "query", &sdpa_dtype},
}};

const CallRule& rule_at(int rule) { return kRules.at(static_cast<size_t>(rule)); }

}  // namespace

int call_rule_id(const std::string& name) {
  for (size_t i = 0; i < kRules.size(); ++i) {
    if (name == kRules[i].name) return static_cast<int>(i);
  }
  TORCH_CHECK(false, "unknown call_rule '", name, "' in data/op_support.toml (the native rules: ",
              c10::Join(", ", call_rule_names()), ")");
}

std::vector<std::string> call_rule_names() {
  std::vector<std::string> names;
  for (const auto& rule : kRules) names.emplace_back(rule.name);
  return names;
}

CallRuleCheck call_rule_check(int rule, const c10::FunctionSchema& schema) {
  auto position = schema.argumentIndexWithName(rule_at(rule).argument);
  TORCH_CHECK(position.has_value(), "call_rule '", rule_at(rule).name, "' reads argument '",
              rule_at(rule).argument, "', which ", schema.name(), " does not have");
  return {rule, static_cast<int>(*position)};
}

bool call_rule_fires(int rule, const c10::IValue& value) { return rule_at(rule).fires(value); }

}  // namespace neuronkit
