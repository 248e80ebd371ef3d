// The input-aware policy rules (call_rules.cpp), defined once. A light header: the per-op kernel and the
// Python binding include it, and call_rules.cpp compiles without pybind or the dispatcher.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace neuronkit {

struct CallRuleCheck {
  int rule;      // index into the rule table
  int position;  // the schema position of the argument it reads
};

int call_rule_id(const std::string& name);  // throws for a name the table lacks
std::vector<std::string> call_rule_names();
CallRuleCheck call_rule_check(int rule, const c10::FunctionSchema& schema);  // throws if the op lacks it
bool call_rule_fires(int rule, const c10::IValue& value);
inline bool call_rule_fires(const CallRuleCheck& check, c10::ArrayRef<c10::IValue> args) {
  return call_rule_fires(check.rule, args[check.position]);
}

}  // namespace neuronkit
