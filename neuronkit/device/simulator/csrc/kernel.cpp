// The per-op kernel of the simulated device: one boxed kernel for every op that reaches PrivateUse1.
//
// Real backend: every aten op the device lowers is a C++ kernel that compiles (or finds in the NEFF cache)
// and runs its graph; the rest reach a boxed CPU fallback that copies to the host, runs CPU's kernel and
// records the op (torch_neuronx/csrc/aten/NeuronFallback.cpp, NeuronBindings.cpp get_fallback_ops). Here
// device memory is host memory, so both run CPU's kernel on CPU aliases of the device tensors (no copy).
//
// Each overload gets a Record once, built from the Python policy (data/op_support.toml through
// neuronkit.policy): kernel.py `describe` gives a NativeRecord, read here by field name. The common call
// runs entirely here: the input-aware rules (call_rules.cpp), 64-bit narrowing and its write-back, the
// core's generator for random ops, tracking, the NEFF-cache hit count, the CPU kernel (or the device's own
// host kernel: attention.cpp, matmul.cpp), results mapped back by the schema's alias annotations. The calls that need
// Python go to `kernel.py` `slow`: errors (a blocked op, a call a rule flags, complex tensors, mixed
// devices), a device generator passed in, pin_memory, the device's Python host kernels, profiler records,
// every op while observers, a compiled graph or a bounded NEFF cache need Python (`route_to_python`), and
// the first call of each NEFF signature (which compiles it). Those calls use the same mechanics: `PythonCall`
// (64-bit narrowing, the NEFF key) and `device_results` (results mapped back) run them for kernel.py.
#include "kernel.h"
#include "runtime.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace torch::jit {
// pybind_utils.h declares these; that header costs more to compile than this whole file.
c10::IValue toIValue(py::handle obj, const c10::TypePtr& type, std::optional<int32_t> N);
py::object toPyObject(c10::IValue ivalue);
class ToIValueAllowNumbersAsTensors {  // toIValue takes a Python number for a Tensor (a wrapped number)
  bool old_;

 public:
  ToIValueAllowNumbersAsTensors(bool enable);
  ~ToIValueAllowNumbersAsTensors();
};
}  // namespace torch::jit

namespace neuronkit {
namespace {

enum class Kind { Kernel, Python, Redispatch, Allocate, Copy, CopyResize };

struct Record {
  Kind kind = Kind::Python;
  bool native = false;       // lowered by the device: counted as executed, compiled into a NEFF
  bool compiles = false;     // native and not a view: one eager NEFF per signature
  bool cross_device = false; // may mix host and device tensors (copies, index tensors)
  bool resizes = false;      // out= or resize_: the device tensor is re-pointed if the host resized it
  bool random = false;       // draws from the core's default generator
  bool view = false;         // a metadata-only op: complex tensors may pass through
  std::vector<CallRuleCheck> rules;  // input-aware rules that stop this call (call_rules.cpp)
  std::vector<int> written_args;     // arguments the op writes, `out` excepted (64-bit narrowing writes back)
  int out = -1;              // position of an `out` argument (never narrowed)
  std::vector<int> alias;    // per return: the argument it aliases, or -1 for a fresh result
  bool aliases = false;      // some return aliases an argument
  std::vector<bool> written; // per return: that argument is written (in-place / out=)
  std::vector<bool> scalar;  // per argument: a Python number there is a 0-d NEFF input, not a key part
  int pin_memory = -1;       // position of a `pin_memory` argument
  int dtype = -1;            // position of the `dtype` argument of an op that compiles: S narrows a 64-bit one
  void (*host)(Stack*) = nullptr;  // the device's own host kernel (attention.cpp, matmul.cpp), else CPU's kernel
  std::string name, qualified;
  std::atomic<uint64_t> seen_epoch{0};  // tracking epoch this op was last recorded in
};

std::mutex g_mutex;  // records, tracking sets, NEFF signatures
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<Record>> g_records;
std::set<std::string> g_executed, g_fallback;
std::atomic<uint64_t> g_epoch{1};
std::unordered_set<std::string> g_signatures;
std::atomic<uint64_t> g_neff_hits{0};
std::atomic<int> g_python_route{0};  // reasons (bits) every op takes the Python path
std::string g_init_error;
py::object* g_describe = nullptr;  // kernel.describe(qualified) -> record fields
py::object* g_slow = nullptr;      // kernel.slow(qualified, values) -> result
std::unordered_map<std::string, uint64_t> g_slow_calls;  // calls that took the Python path, per overload (GIL)

std::string qualified_name(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

Kind kind_of(const std::string& kind) {
  if (kind == "kernel") return Kind::Kernel;
  if (kind == "redispatch") return Kind::Redispatch;
  if (kind == "allocate") return Kind::Allocate;
  if (kind == "copy") return Kind::Copy;
  if (kind == "copy_resize") return Kind::CopyResize;
  return Kind::Python;
}

const Record& build_record(const c10::OperatorHandle& op);

// An overload's record: looked up per call, so each thread keeps the ones it used last in a small direct-mapped
// table (records live as long as the process) and takes the lock only on a miss.
const Record& record_for(const c10::OperatorHandle& op) {
  const auto* key = &op.schema();
  thread_local std::array<std::pair<const c10::FunctionSchema*, const Record*>, 512> recent{};
  auto& slot = recent[(reinterpret_cast<uintptr_t>(key) >> 4) % recent.size()];
  if (slot.first == key) return *slot.second;
  const Record& record = build_record(op);
  slot = {key, &record};
  return record;
}

const Record& build_record(const c10::OperatorHandle& op) {
  const auto* key = &op.schema();
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto found = g_records.find(key);
    if (found != g_records.end()) return *found->second;
  }
  auto record = std::make_unique<Record>();
  record->qualified = qualified_name(op);
  static const std::unordered_map<std::string, void (*)(Stack*)> hosts{
      {"aten::_scaled_dot_product_fused_attention_overrideable", &boxed_fused_attention},
      {"aten::_scaled_dot_product_fused_attention_overrideable_backward", &boxed_fused_attention_backward},
      {"aten::mm", &boxed_mm},
      {"aten::addmm", &boxed_addmm},
      {"aten::bmm", &boxed_bmm},
      {"aten::baddbmm", &boxed_baddbmm},
  };
  if (auto host = hosts.find(record->qualified); host != hosts.end()) record->host = host->second;
  const auto& arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "pin_memory") record->pin_memory = static_cast<int>(i);
  }
  {
    py::gil_scoped_acquire gil;
    py::object described = (*g_describe)(record->qualified);  // kernel.py NativeRecord
    record->kind = kind_of(described.attr("kind").cast<std::string>());
    record->native = described.attr("native").cast<bool>();
    record->compiles = described.attr("compiles").cast<bool>();
    record->cross_device = described.attr("cross_device").cast<bool>();
    record->resizes = described.attr("resizes").cast<bool>();
    for (auto spec : described.attr("returns").cast<py::list>()) {
      if (spec.is_none()) {
        record->alias.push_back(-1);
        record->written.push_back(false);
      } else {
        auto pair = spec.cast<py::tuple>();
        record->alias.push_back(pair[0].cast<int>());
        record->written.push_back(pair[1].cast<bool>());
      }
    }
    record->scalar.assign(arguments.size(), false);
    for (auto position : described.attr("scalars").cast<py::list>()) record->scalar[position.cast<size_t>()] = true;
    record->name = described.attr("name").cast<std::string>();
    record->random = described.attr("random").cast<bool>();
    record->view = described.attr("view").cast<bool>();
    if (record->compiles) {
      for (size_t i = 0; i < arguments.size(); ++i) {
        if (arguments[i].name() == "dtype") record->dtype = static_cast<int>(i);
      }
    }
    for (auto name : described.attr("call_rules").cast<py::list>()) {
      record->rules.push_back(call_rule_check(call_rule_id(name.cast<std::string>()), op.schema()));
    }
  }
  record->aliases = std::any_of(record->alias.begin(), record->alias.end(), [](int pos) { return pos >= 0; });
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "out") {
      record->out = static_cast<int>(i);
    } else if (arguments[i].alias_info() && arguments[i].alias_info()->isWrite()) {
      record->written_args.push_back(static_cast<int>(i));
    }
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& slot = g_records[key];
  if (!slot) slot = std::move(record);
  return *slot;
}

// ---------------------------------------------------------------------------------------------------
// The Python slow path: the stack as Python values in schema order, the result pushed back.

py::object to_python(const c10::Argument& argument, const c10::IValue& value) {
  if (value.isNone()) return py::none();
  auto type = argument.real_type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  switch (type->kind()) {
    case c10::TypeKind::ScalarTypeType:
      return py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(value.toInt()))));
    case c10::TypeKind::LayoutType:
      return py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<c10::Layout>(value.toInt()))));
    case c10::TypeKind::MemoryFormatType:
      return py::cast(static_cast<c10::MemoryFormat>(value.toInt()));
    default:
      break;
  }
  if (value.isTensor() && value.toTensor().unsafeGetTensorImpl()->is_wrapped_number()) {
    // A Python number passed where the schema says Tensor stays the wrapped-number tensor the dispatcher made
    // of it (toPyObject would make it a number again): the Python path calls the overload with it, and
    // torch.ops takes a bare number in a Tensor position only for a few ops (`add`, `mul`, ...; not
    // `remainder.Tensor_out` or `bitwise_and.Tensor_out`, which `x % 7` and `x & 1` reach through their
    // composites), while the flag keeps the number's type promotion.
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(value.toTensor()));
  }
  return torch::jit::toPyObject(value);
}

void python_path(const c10::OperatorHandle& op, Stack* stack, const Record& record) {
  const auto& schema = op.schema();
  auto arguments = torch::jit::pop(*stack, schema.arguments().size());
  py::gil_scoped_acquire gil;
  ++g_slow_calls[record.qualified];
  py::list values(arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) values[i] = to_python(schema.arguments()[i], arguments[i]);
  arguments.clear();
  py::object out = (*g_slow)(record.qualified, values);
  const auto& returns = schema.returns();
  if (returns.size() == 1) {
    torch::jit::push(stack, torch::jit::toIValue(out, returns[0].type(), std::nullopt));
  } else if (!returns.empty()) {
    auto outs = out.cast<py::sequence>();
    for (size_t i = 0; i < returns.size(); ++i) {
      torch::jit::push(stack, torch::jit::toIValue(outs[i], returns[i].type(), std::nullopt));
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// The fast path.

bool is_device(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// What the call's tensors say: the device index of its neuron tensors, whether one is 64-bit (float64 or
// non-empty int64: narrowed; an empty int64, SDPA's philox seed and offset, has no values to narrow) or
// complex (raises, in Python, unless the op is a view), and whether the Python path must handle the call
// (two devices; a host tensor where the op takes none is decided by the caller).
struct Scan {
  int index = -1;
  bool host = false;
  bool python = false;
  bool wide = false;
  bool complex = false;

  void tensor(const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == kNeuron) {
      int found = t.device().index();
      auto dtype = t.scalar_type();
      wide = wide || dtype == at::kDouble || (dtype == at::kLong && t.numel() > 0);
      complex = complex || at::isComplexType(dtype);
      if (index >= 0 && found != index) python = true;
      index = found;
    } else if (t.dim() > 0) {
      host = true;
    }
  }
};

template <typename Fn>
void each_tensor(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    fn(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList().vec()) fn(t);
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) {
      if (element.isTensor()) fn(element.toTensor());
    }
  }
}

void put(std::string& key, const void* data, size_t size) { key.append(static_cast<const char*>(data), size); }

template <typename T>
void put(std::string& key, T value) {
  put(key, &value, sizeof(value));
}

void put_tensor(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key.push_back('N');
    return;
  }
  key.push_back('T');
  put(key, static_cast<int8_t>(t.scalar_type()));
  put(key, static_cast<int64_t>(t.dim()));
  put(key, t.sizes().data(), t.dim() * sizeof(int64_t));
}

// One argument's part of the NEFF signature: tensor shapes and dtypes, static values, and only the type of a
// Python number in a Scalar or Scalar[] (or wrapped-number Tensor) position. False for a value the fast path
// does not key (it sends the call to Python); `complete` (the Python path) keys those too: a complex number by
// value, a generator by its presence.
bool put_value(std::string& key, const c10::IValue& value, bool scalar, bool complete) {
  if (value.isNone()) {
    key.push_back('N');
  } else if (value.isTensor()) {
    const auto& t = value.toTensor();
    if (scalar && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      if (at::isComplexType(t.scalar_type())) {
        if (!complete) return false;
        key.push_back('z');
        put(key, t.item<c10::complex<double>>());
      } else {
        key.push_back('w');
        put(key, static_cast<int8_t>(t.scalar_type()));
      }
    } else {
      put_tensor(key, t);
    }
  } else if (value.isComplexDouble()) {
    if (!complete) return false;
    key.push_back('z');
    put(key, value.toComplexDouble());
  } else if (scalar && value.isScalar()) {
    key.push_back(value.isBool() ? 'b' : value.isInt() ? 'i' : 'f');
  } else if (value.isInt()) {
    key.push_back('I');
    put(key, value.toInt());
  } else if (value.isSymInt()) {
    key.push_back('I');
    put(key, value.toSymInt().expect_int());
  } else if (value.isDouble()) {
    key.push_back('D');
    put(key, value.toDouble());
  } else if (value.isBool()) {
    key.push_back(value.toBool() ? 'Y' : 'n');
  } else if (value.isString()) {
    const auto& s = value.toStringRef();
    key.push_back('S');
    put(key, s.size());
    put(key, s.data(), s.size());
  } else if (value.isDevice()) {
    key.push_back('C');  // a device argument names the host once the call runs there
  } else if (value.isList()) {
    const auto& list = value.toListRef();
    key.push_back('[');
    put(key, list.size());
    for (const auto& element : list) {
      if (!put_value(key, element, scalar, complete)) return false;  // a Scalar[]'s numbers: their types only
    }
  } else if (complete && value.isGenerator()) {
    key.push_back('G');
  } else {
    return false;
  }
  return true;
}

// The call's NEFF signature; empty when it has none (an empty positional tensor: nothing to compile) or
// when the fast path cannot key it. The fast path names the op by its schema's address (this process's
// records); `stable` (the Python path, whose keys name persistent NEFFs) by its qualified name, and keys
// every value (`put_value`'s `complete`).
bool signature_into(std::string& key, const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                    const Record& record, bool stable = false) {
  key.clear();
  if (stable) {
    key.append(record.qualified);
    key.push_back('\0');
  } else {
    put(key, &schema);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& value = args[i];
    if (!schema.arguments()[i].kwarg_only() && value.isTensor() && value.toTensor().defined() &&
        !value.toTensor().unsafeGetTensorImpl()->is_wrapped_number() && value.toTensor().numel() == 0) {
      key.clear();
      return true;
    }
    if (!put_value(key, value, record.scalar[i], stable)) {
      key.clear();
      return false;
    }
  }
  return true;
}

std::pair<std::string, bool> signature(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                                       const Record& record, bool stable = false) {
  std::string key;
  key.reserve(128);
  const bool keyed = signature_into(key, schema, args, record, stable);
  return {std::move(key), keyed};
}

at::Tensor host_view(const at::Tensor& t) {
  auto alias = to_cpu(t);
  return t.is_neg() ? at::_neg_view(alias) : alias;
}

c10::IValue to_host(const c10::IValue& value) {
  if (value.isTensor()) {
    const auto& t = value.toTensor();
    return is_device(t) ? c10::IValue(host_view(t)) : value;
  }
  if (value.isTensorList()) {
    auto list = value.toTensorList().vec();
    for (auto& t : list) {
      if (is_device(t)) t = host_view(t);
    }
    return c10::IValue(c10::List<at::Tensor>(list));
  }
  if (value.isList()) {
    bool any = false;
    for (const auto& element : value.toListRef()) any = any || (element.isTensor() && is_device(element.toTensor()));
    if (!any) return value;
    auto list = value.toList().copy();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue element = list.get(i);
      if (element.isTensor() && is_device(element.toTensor())) list.set(i, c10::IValue(host_view(element.toTensor())));
    }
    return c10::IValue(list);
  }
  return value;
}

// Point device tensor `t` at `cpu`'s memory and geometry after a host kernel resized it.
void rebind(const at::Tensor& t, const at::Tensor& cpu) {
  const c10::DispatchKeySet cpu_keys(c10::DispatchKey::CPU);
  if (cpu.storage().data_ptr().get() != t.storage().data_ptr().get()) {
    auto fresh = wrap(cpu, t.device().index());
    at::_ops::set__source_Storage_storage_offset::redispatch(cpu_keys, const_cast<at::Tensor&>(t), fresh.storage(),
                                                             cpu.sym_storage_offset(), cpu.sym_sizes(),
                                                             cpu.sym_strides());
  } else if (cpu.sizes() != t.sizes() || cpu.strides() != t.strides() ||
             cpu.storage_offset() != t.storage_offset()) {
    at::_ops::set__source_Storage_storage_offset::redispatch(cpu_keys, const_cast<at::Tensor&>(t), t.storage(),
                                                             cpu.sym_storage_offset(), cpu.sym_sizes(),
                                                             cpu.sym_strides());
  }
}

at::Tensor view_of(const at::Tensor& base, const at::Tensor& r) {
  return at::_ops::as_strided::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), base, r.sym_sizes(),
                                          r.sym_strides(), r.sym_storage_offset());
}

// A host result as a device tensor over its memory. A ZeroTensor (`_efficientzerotensor`, the gradient of
// sgn, sign, ...) has no memory to point at: it becomes real zeros, as S's boxed fallback copies it to the
// device (found by the OpInfo sweep: wrapping its null data crashed the first read).
at::Tensor on_device(const at::Tensor& t, int target) {
  if (C10_UNLIKELY(t._is_zerotensor())) {
    return wrap(at::zeros(t.sizes(), t.options().device(at::kCPU)), target);
  }
  return wrap(t, target);
}

c10::IValue fresh_result(const c10::IValue& value, int target) {
  if (target < 0) return value;  // `device=` named the host
  if (value.isTensor()) {
    const auto& t = value.toTensor();
    return t.defined() && t.device().is_cpu() ? c10::IValue(on_device(t, target)) : value;
  }
  if (value.isTensorList()) {
    auto list = value.toTensorList().vec();
    for (auto& t : list) {
      if (t.defined() && t.device().is_cpu()) t = on_device(t, target);
    }
    return c10::IValue(c10::List<at::Tensor>(list));
  }
  return value;
}

c10::IValue aliased_result(const c10::IValue& value, const c10::IValue& base, bool written, bool resizes) {
  if (!base.isTensor() || !is_device(base.toTensor())) return value;
  const auto& device = base.toTensor();
  if (written) {
    if (resizes && value.isTensor()) rebind(device, value.toTensor());
    return base;
  }
  if (value.isTensor()) return c10::IValue(view_of(device, value.toTensor()));
  if (value.isTensorList()) {
    auto list = value.toTensorList().vec();
    for (auto& t : list) t = view_of(device, t);
    return c10::IValue(c10::List<at::Tensor>(list));
  }
  return value;
}

// ---------------------------------------------------------------------------------------------------
// 64-bit narrowing, as the device does it (S: torch_neuronx/python_ops/dtype_autocast.py, `_process_value`):
// for an op the device compiles, every non-0-d float64/int64 tensor argument (and every one inside a list,
// 0-d included; `out` excepted) is narrowed to 32 bit before the op and the outputs restored to the 64-bit
// type. float64 is computed in float32. int64 values are wrapped to the int32 range before and after the op
// but kept as int64 tensors, because CPU's kernels insist on int64 for indices and targets (the device's
// take int32); modular arithmetic makes that equal to computing in int32. A written argument gets the
// result back at its width. A 64-bit `dtype` argument is narrowed too (S: python_ops/torch_mlir/op_impl.py:89-95
// runs every torch-mlir op under autocast_neuron(cast_dtype_params=True), dtype_autocast.py:71-78): the op
// computes at 32 bit and an int result is returned at the int64 asked for. The fast path sends such a call
// to Python, which narrows it here too (`PythonCall`).

struct Narrowing {
  bool had_double = false;
  bool had_long = false;
  bool had_long_dtype = false;

  c10::ScalarType dtype(c10::ScalarType type) {
    if (type == at::kDouble) {
      had_double = true;
      return at::kFloat;
    }
    if (type == at::kLong) {
      had_long = had_long_dtype = true;
      return at::kInt;
    }
    return type;
  }

  bool narrows(const at::Tensor& t) const {
    return t.defined() && (t.scalar_type() == at::kDouble || t.scalar_type() == at::kLong);
  }

  at::Tensor tensor(const at::Tensor& t) {
    if (t.scalar_type() == at::kDouble) {
      had_double = true;
      return t.to(at::kFloat);
    }
    had_long = true;
    return t.to(at::kInt).to(at::kLong);
  }

  c10::IValue value(const c10::IValue& v) {
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      return narrows(t) && t.dim() > 0 ? c10::IValue(tensor(t)) : v;
    }
    if (v.isTensorList()) {
      auto list = v.toTensorList().vec();
      for (auto& t : list) {
        if (narrows(t)) t = tensor(t);
      }
      return c10::IValue(c10::List<at::Tensor>(list));
    }
    if (v.isList()) {
      auto list = v.toList().copy();
      for (size_t i = 0; i < list.size(); ++i) {
        c10::IValue element = list.get(i);
        if (element.isTensor() && narrows(element.toTensor())) list.set(i, c10::IValue(tensor(element.toTensor())));
      }
      return c10::IValue(list);
    }
    return v;
  }

  // A result as the device returns it: float32 back to float64, int64 wrapped to the int32 range.
  at::Tensor restore(const at::Tensor& t) const {
    if (!t.defined()) return t;
    if (had_double && t.scalar_type() == at::kFloat) return t.to(at::kDouble);
    if (had_long && t.scalar_type() == at::kLong && t.numel() > 0) return t.to(at::kInt).to(at::kLong);
    if (had_long_dtype && t.scalar_type() == at::kInt) return t.to(at::kLong);
    return t;
  }

  c10::IValue restore(const c10::IValue& v) const {
    if (v.isTensor()) return c10::IValue(restore(v.toTensor()));
    if (v.isTensorList()) {
      auto list = v.toTensorList().vec();
      for (auto& t : list) t = restore(t);
      return c10::IValue(c10::List<at::Tensor>(list));
    }
    return v;
  }

  // The written argument `original` gets what the op wrote into its narrowed copy `narrowed`.
  void write_back(const c10::IValue& original, const c10::IValue& narrowed) const {
    std::vector<at::Tensor> from, to;
    each_tensor(original, [&](const at::Tensor& t) { to.push_back(t); });
    each_tensor(narrowed, [&](const at::Tensor& t) { from.push_back(t); });
    for (size_t i = 0; i < to.size() && i < from.size(); ++i) {
      if (to[i].defined() && !from[i].is_same(to[i])) {
        to[i].copy_(had_long && from[i].scalar_type() == at::kLong ? restore(from[i]) : from[i]);
      }
    }
  }
};

void track(const Record& record) {
  // A view S's fallback whitelists runs on the host unlogged (S NeuronBindings.cpp:232-246).
  if (!record.native && record.view) return;
  uint64_t epoch = g_epoch.load(std::memory_order_relaxed);
  if (record.seen_epoch.load(std::memory_order_relaxed) == epoch) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  (record.native ? g_executed.insert(record.name) : g_fallback.insert(record.qualified));
  const_cast<Record&>(record).seen_epoch.store(epoch, std::memory_order_relaxed);
}

void run_kernel(const c10::OperatorHandle& op, Stack* stack, const Record& record) {
  if (g_python_route.load(std::memory_order_relaxed) || torch::profiler::impl::profilerEnabled()) {
    return python_path(op, stack, record);
  }
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  for (const auto& check : record.rules) {
    if (call_rule_fires(check, args)) return python_path(op, stack, record);  // Python builds the error
  }
  Scan scan;
  int target = -1;
  bool target_set = false;
  for (size_t i = 0; i < nargs; ++i) {
    const auto& value = args[i];
    if (value.isDevice()) {
      const auto device = value.toDevice();
      target_set = true;
      target = device.type() == kNeuron ? (device.has_index() ? device.index() : current_device()) : -1;
      if (device.type() != kNeuron && !device.is_cpu()) scan.python = true;
    } else if (value.isGenerator()) {
      scan.python = scan.python || value.toGenerator().device().type() == kNeuron;
    } else if (static_cast<int>(i) == record.pin_memory) {
      scan.python = scan.python || (value.isBool() && value.toBool());
    } else if (static_cast<int>(i) == record.dtype && value.isInt()) {  // narrowed on the Python path (`PythonCall`)
      const auto type = static_cast<c10::ScalarType>(value.toInt());
      scan.python = scan.python || type == at::kDouble || type == at::kLong;
    } else {
      each_tensor(value, [&](const at::Tensor& t) { scan.tensor(t); });
    }
  }
  if (scan.python || (scan.complex && !record.view) || (scan.host && scan.index >= 0 && !record.cross_device)) {
    return python_path(op, stack, record);
  }
  if (!target_set) target = scan.index >= 0 ? scan.index : current_device();
  if (record.compiles) {
    thread_local std::string key;  // reused: a known signature (the common call) allocates nothing
    if (!signature_into(key, schema, args, record)) return python_path(op, stack, record);
    if (!key.empty()) {
      bool known;
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        known = g_signatures.find(key) != g_signatures.end();
        if (!known) g_signatures.insert(key);
      }
      if (!known) return python_path(op, stack, record);  // a first-seen signature: Python compiles it
      g_neff_hits.fetch_add(1, std::memory_order_relaxed);
    }
  }
  track(record);
  std::vector<c10::IValue> originals;  // the device arguments, for results that alias them
  if (record.aliases) originals.assign(args.begin(), args.end());
  const bool narrow = scan.wide && record.compiles;
  Narrowing narrowing;
  std::vector<c10::IValue> hosts, narrowed;  // written arguments before and after narrowing
  for (size_t i = 0; i < nargs; ++i) {
    auto& slot = (*stack)[stack->size() - nargs + i];
    if (slot.isDevice()) {
      slot = c10::IValue(c10::Device(c10::kCPU));
    } else {
      slot = to_host(slot);
      if (narrow && static_cast<int>(i) != record.out) {
        auto host = slot;
        slot = narrowing.value(host);
        if (std::find(record.written_args.begin(), record.written_args.end(), static_cast<int>(i)) !=
            record.written_args.end()) {
          hosts.push_back(std::move(host));
          narrowed.push_back(slot);
        }
      }
    }
  }
  auto compute = [&] {
    if (record.host) {
      record.host(stack);
    } else {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    }
  };
  if (record.random) {
    lend_generator(default_generator(target >= 0 ? target : scan.index >= 0 ? scan.index : current_device()),
                   compute);
  } else {
    compute();
  }
  const size_t nret = record.alias.size();
  if (narrow && (narrowing.had_double || narrowing.had_long)) {
    for (size_t i = 0; i < hosts.size(); ++i) narrowing.write_back(hosts[i], narrowed[i]);
    for (size_t j = 0; j < nret; ++j) {
      if (record.alias[j] >= 0 && record.written[j]) continue;  // the device tensor itself, written back above
      auto& slot = (*stack)[stack->size() - nret + j];
      slot = narrowing.restore(slot);
    }
  }
  for (size_t j = 0; j < nret; ++j) {
    auto& slot = (*stack)[stack->size() - nret + j];
    int pos = record.alias[j];
    slot = pos < 0 ? fresh_result(slot, target)
                   : aliased_result(slot, originals[pos], record.written[j], record.resizes);
  }
}

// `empty.memory_format`, `empty_strided`: a fresh host buffer on the named (or current) core. The core's HBM is
// reserved first (the buffer's size from the same call on the meta device), so a request past it raises the
// device's out-of-memory error before any host memory is taken, as the real allocator fails in the runtime.
void allocate(const c10::OperatorHandle& op, Stack* stack, const Record& record) {
  TORCH_CHECK(g_init_error.empty(), g_init_error);
  const size_t nargs = op.schema().arguments().size();
  int index = current_device();
  for (size_t i = 0; i < nargs; ++i) {
    auto& slot = (*stack)[stack->size() - nargs + i];
    if (slot.isDevice()) {
      if (slot.toDevice().has_index()) index = slot.toDevice().index();
      slot = c10::IValue(c10::Device(c10::kCPU));
    } else if (static_cast<int>(i) == record.pin_memory) {
      slot = c10::IValue();
    }
  }
  Stack meta(stack->end() - nargs, stack->end());
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  const uint64_t nbytes = meta.back().toTensor().storage().nbytes();
  if (nbytes > 0) reserve(index, nbytes);
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (...) {
    if (nbytes > 0) release(index, nbytes);
    throw;
  }
  stack->back() = c10::IValue(wrap(stack->back().toTensor(), index, nbytes));
}

// `_copy_from(src, dst)` / `_copy_from_and_resize`: host<->device copies (DMA; no NEFF).
void copy(const c10::OperatorHandle& op, Stack* stack, bool resize) {
  const size_t nargs = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  at::Tensor src = args[0].toTensor(), dst = args[1].toTensor();
  torch::jit::drop(*stack, nargs);
  at::Tensor host_src = is_device(src) ? host_view(src) : src;
  if (is_device(dst)) {
    at::Tensor host_dst = host_view(dst);
    if (resize && host_dst.sizes() != host_src.sizes()) {
      host_dst.resize_(host_src.sizes());
      rebind(dst, host_dst);
    }
    host_dst.copy_(host_src);
  } else {
    if (resize) dst.resize_(host_src.sizes());
    dst.copy_(host_src);
  }
  torch::jit::push(stack, dst);
}

void kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const Record& record = record_for(op);
  switch (record.kind) {
    case Kind::Kernel:
      return run_kernel(op, stack, record);
    case Kind::Redispatch:
      return op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    case Kind::Allocate:
      return allocate(op, stack, record);
    case Kind::Copy:
      return copy(op, stack, false);
    case Kind::CopyResize:
      return copy(op, stack, true);
    case Kind::Python:
      return python_path(op, stack, record);
  }
}

}  // namespace

void install_kernel(py::object describe, py::object slow, const std::vector<std::string>& overloads,
                    const std::string& init_error) {
  static std::once_flag once;
  std::call_once(once, [&] {
    g_describe = new py::object(std::move(describe));  // live as long as the process, as the registrations
    g_slow = new py::object(std::move(slow));
    g_init_error = init_error;
    // Every op without a composite kernel reaches the fallback; overloads upstream implements as
    // CompositeExplicitAutograd (which outranks a fallback) are registered by name.
    auto* all = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    all->fallback(torch::CppFunction::makeFromBoxedFunction<&kernel>());
    auto* aten = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const auto& name : overloads) aten->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel>());
  });
}

// ---------------------------------------------------------------------------------------------------
// kernel.py's Python path uses the same per-call mechanics: `PythonCall` (bound as `_native.PythonCall`)
// keys, narrows and restores one call it runs, and `device_results` maps its results back to the device.

namespace {

c10::OperatorHandle handle_of(const std::string& qualified) {
  const auto dot = qualified.find('.');
  const auto overload = dot == std::string::npos ? std::string() : qualified.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified.substr(0, dot).c_str(), overload.c_str());
}

// The Python value of argument or return `type` as the dispatcher passes it (a number in a Tensor position is
// a wrapped number, as the fast path sees it).
c10::IValue ivalue_of(const py::handle& value, const c10::TypePtr& type) {
  torch::jit::ToIValueAllowNumbersAsTensors numbers(true);
  return torch::jit::toIValue(value, type, std::nullopt);
}

py::object python_results(std::vector<c10::IValue>& results) {
  if (results.empty()) return py::none();
  if (results.size() == 1) return torch::jit::toPyObject(std::move(results[0]));
  py::tuple out(results.size());
  for (size_t i = 0; i < results.size(); ++i) out[i] = torch::jit::toPyObject(std::move(results[i]));
  return std::move(out);
}

std::vector<c10::IValue> ivalue_results(const c10::FunctionSchema& schema, const py::object& result) {
  const auto& returns = schema.returns();
  std::vector<c10::IValue> values;
  if (returns.size() == 1) {
    values.push_back(ivalue_of(result, returns[0].real_type()));
  } else if (!returns.empty()) {
    auto items = result.cast<py::sequence>();
    for (size_t i = 0; i < returns.size(); ++i) values.push_back(ivalue_of(items[i], returns[i].real_type()));
  }
  return values;
}

bool narrowable(const c10::IValue& value) {
  bool found = false;
  const auto wide = [](const at::Tensor& t) {
    return t.defined() && (t.scalar_type() == at::kDouble || t.scalar_type() == at::kLong);
  };
  if (value.isTensor()) return wide(value.toTensor()) && value.toTensor().dim() > 0;
  each_tensor(value, [&](const at::Tensor& t) { found = found || wide(t); });
  return found;
}

}  // namespace

struct PythonCall::State {
  c10::OperatorHandle op;
  const Record* record;
  std::vector<c10::IValue> args;
  Narrowing narrowing;
  std::vector<std::pair<size_t, c10::IValue>> written;  // written arguments narrowed: (position, narrowed)
};

PythonCall::PythonCall(const std::string& qualified, const py::list& values) : state_(new State{handle_of(qualified)}) {
  auto& s = *state_;
  s.record = &record_for(s.op);
  const auto& arguments = s.op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) s.args.push_back(ivalue_of(values[i], arguments[i].real_type()));
}

PythonCall::~PythonCall() = default;

py::object PythonCall::key() const {
  const auto& s = *state_;
  const std::string key = signature(s.op.schema(), s.args, *s.record, true).first;
  if (key.empty()) return py::none();
  return py::bytes(key);
}

py::list PythonCall::narrowed(const py::list& values) {
  auto& s = *state_;
  const auto& arguments = s.op.schema().arguments();
  py::list out(values.size());
  for (size_t i = 0; i < s.args.size(); ++i) {
    out[i] = values[i];
    const auto& value = s.args[i];
    if (static_cast<int>(i) == s.record->out) continue;
    if (static_cast<int>(i) == s.record->dtype && value.isInt()) {
      out[i] = to_python(arguments[i], c10::IValue(static_cast<int64_t>(
                                            s.narrowing.dtype(static_cast<c10::ScalarType>(value.toInt())))));
      continue;
    }
    if (!narrowable(value)) continue;
    auto narrow = s.narrowing.value(value);
    if (std::find(s.record->written_args.begin(), s.record->written_args.end(), static_cast<int>(i)) !=
        s.record->written_args.end()) {
      s.written.emplace_back(i, narrow);
    }
    out[i] = py::isinstance<py::tuple>(values[i]) ? py::tuple(to_python(arguments[i], narrow))
                                                  : to_python(arguments[i], narrow);
  }
  return out;
}

py::object PythonCall::restored(const py::object& result) {
  auto& s = *state_;
  const auto& schema = s.op.schema();
  auto results = ivalue_results(schema, result);
  for (const auto& [pos, narrow] : s.written) s.narrowing.write_back(s.args[pos], narrow);
  for (size_t j = 0; j < results.size(); ++j) {
    const int pos = s.record->alias[j];
    if (pos >= 0 && s.record->written[j]) {
      results[j] = s.args[pos];  // the argument itself, its result written back above
    } else {
      results[j] = s.narrowing.restore(results[j]);
    }
  }
  return python_results(results);
}

py::object device_results(const std::string& qualified, const py::object& result, const py::list& values,
                          std::optional<int> target) {
  auto op = handle_of(qualified);
  const Record& record = record_for(op);
  const auto& schema = op.schema();
  auto results = ivalue_results(schema, result);
  for (size_t j = 0; j < results.size(); ++j) {
    const int pos = record.alias[j];
    results[j] = pos < 0 ? fresh_result(results[j], target.value_or(-1))
                         : aliased_result(results[j], ivalue_of(values[pos], schema.arguments()[pos].real_type()),
                                          record.written[j], record.resizes);
  }
  return python_results(results);
}

std::vector<std::string> composite_explicit_overloads() {
  using c10::DispatchKey;
  std::vector<std::string> found;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(DispatchKey::CompositeImplicitAutograd)) continue;
    bool explicit_ = op->hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutograd);
    if (explicit_ || op->hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutogradNonFunctional)) {
      found.push_back((explicit_ ? "E" : "N") + (name.overload_name.empty() ? name.name : name.name + "." + name.overload_name));
    }
  }
  return found;
}

void record_op(const std::string& name, bool fallback) {
  std::lock_guard<std::mutex> lock(g_mutex);
  (fallback ? g_fallback : g_executed).insert(name);
}

std::vector<std::string> tracked_ops(bool fallback) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto& ops = fallback ? g_fallback : g_executed;
  return {ops.begin(), ops.end()};
}

void clear_tracking() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_executed.clear();
  g_fallback.clear();
  g_epoch.fetch_add(1);
}

uint64_t neff_hits() { return g_neff_hits.load(); }

void neff_forget() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_signatures.clear();
  g_neff_hits.store(0);
}

std::unordered_map<std::string, uint64_t> slow_calls() { return g_slow_calls; }

void route_to_python(int reason, bool on) {
  if (on) {
    g_python_route.fetch_or(reason);
  } else {
    g_python_route.fetch_and(~reason);
  }
}

}  // namespace neuronkit
