// The Python face of the native runtime: `neuronkit.device.simulator._native`.
#include "kernel.h"
#include "runtime.h"

#include <ATen/core/dispatch/Dispatcher.h>
// torch/csrc/utils/pybind.h (Tensor casters) rather than torch/extension.h, which takes minutes to parse.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace torch::jit {
// pybind_utils.h declares it; that header costs more to compile than this whole file.
c10::IValue toIValue(py::handle obj, const c10::TypePtr& type, std::optional<int32_t> N);
}  // namespace torch::jit

namespace neuronkit {
namespace {

void init(int count, uint64_t hbm_bytes_per_core, py::function oom_message) {
  set_device_count(count);
  configure_accounts(count, hbm_bytes_per_core);
  // Called from the allocator, possibly on a thread that does not hold the GIL.
  auto* held = new py::function(std::move(oom_message));  // lives as long as the process
  set_oom_message([held](c10::DeviceIndex index, uint64_t nbytes) {
    py::gil_scoped_acquire gil;
    return (*held)(index, nbytes).cast<std::string>();
  });
  register_hooks();
}

py::tuple counters_tuple(c10::DeviceIndex index) {
  auto c = counters(index);
  return py::make_tuple(c.capacity, c.current, c.peak, c.allocations, c.frees, c.num_ooms, c.bytes_allocated,
                        c.bytes_freed);
}

}  // namespace

bool call_rule(const std::string& name, const std::string& qualified, const py::dict& call) {
  const auto dot = qualified.find('.');
  const auto overload = dot == std::string::npos ? std::string() : qualified.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(qualified.substr(0, dot).c_str(), overload.c_str());
  const int rule = call_rule_id(name);
  const auto& argument = handle.schema().arguments()[call_rule_check(rule, handle.schema()).position];
  c10::IValue value;
  if (call.contains(argument.name())) {
    value = torch::jit::toIValue(call[argument.name().c_str()], argument.real_type(), std::nullopt);
  } else if (argument.default_value()) {
    value = *argument.default_value();
  }
  return call_rule_fires(rule, value);
}

namespace {

py::object python_default_generator(c10::DeviceIndex index) {
  return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(index)));
}

// A Python number (addmm's beta and alpha) as the Scalar ATen takes: bool, int or float as it is.
c10::Scalar scalar_of(const py::handle& value) {
  return torch::jit::toIValue(value, c10::NumberType::get(), std::nullopt).toScalar();
}

}  // namespace
}  // namespace neuronkit

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace neuronkit;
  m.doc() = "Native runtime of neuronkit's simulated neuron device";
  m.def("init", &init, "Set the device count and HBM budget, and register the hooks",
        py::arg("device_count"), py::arg("hbm_bytes_per_core"), py::arg("oom_message"));
  m.def("device_count", &device_count);
  m.def("current_device", &current_device);
  m.def("set_device", &set_device, py::arg("index"));
  m.def("exchange_device", &exchange_device, py::arg("index"));
  m.def("place_process", &place_process,
        "Place this process as a process group does: device_count() becomes the local world size, and only "
        "neuron:<local_rank> may be selected or hold memory",
        py::arg("local_world_size"), py::arg("local_rank"));
  m.def("wrap", [](const at::Tensor& cpu, c10::DeviceIndex index) { return wrap(cpu, index); },
        "A device tensor over a CPU tensor's memory, counted against the core's HBM", py::arg("cpu"), py::arg("index"));
  m.def("to_cpu", &to_cpu, "A CPU tensor over a device tensor's memory", py::arg("device"));
  m.def("counters", &counters_tuple,
        "(capacity, current, peak, allocations, frees, num_ooms, bytes_allocated, bytes_freed) of a core",
        py::arg("index"));
  m.def("reset_peak", &reset_peak, py::arg("index"));
  m.def("reset_accumulated", &reset_accumulated, py::arg("index"));
  m.def("default_generator", &python_default_generator, py::arg("index"));
  m.def(
      "lend_generator",
      [](const py::object& source, const py::function& run) {
        py::object result;
        lend_generator(reinterpret_cast<THPGenerator*>(source.ptr())->cdata, [&] { result = run(); });
        return result;
      },
      "run() drawing from generator `source` through the host's default generator", py::arg("source"),
      py::arg("run"));
  m.def("install_kernel", &install_kernel, "Register the per-op kernel for PrivateUse1", py::arg("describe"),
        py::arg("slow"), py::arg("overloads"), py::arg("init_error"));
  m.def("install_sdpa_router", &install_sdpa_router,
        "Register SDPA's backend choice for neuron (the fused kernel for 4-D inputs without dropout)");
  m.def("fused_attention", &fused_attention, "The device's fused SDPA kernel on host tensors", py::arg("query"),
        py::arg("key"), py::arg("value"), py::arg("attn_bias") = py::none(), py::arg("dropout_p") = 0.0,
        py::arg("is_causal") = false, py::arg("return_debug_mask") = false, py::kw_only(),
        py::arg("scale") = py::none());
  m.def(
      "fused_attention_backward",
      [](const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
         const std::optional<at::Tensor>& attn_bias, const py::object& /*grad_input_mask*/, const py::object& /*out*/,
         const at::Tensor& logsumexp, const py::object& /*cum_seq_q*/, const py::object& /*cum_seq_k*/,
         const py::object& /*max_q*/, const py::object& /*max_k*/, double /*dropout_p*/, bool is_causal,
         const py::object& /*philox_seed*/, const py::object& /*philox_offset*/, std::optional<double> scale) {
        return fused_attention_backward(grad_out, query, key, value, attn_bias.value_or(at::Tensor()), logsumexp,
                                        is_causal, scale);
      },
      "The gradients of fused_attention (schema order)", py::arg("grad_out"), py::arg("query"), py::arg("key"),
      py::arg("value"), py::arg("attn_bias"), py::arg("grad_input_mask"), py::arg("out"), py::arg("logsumexp"),
      py::arg("cum_seq_q"), py::arg("cum_seq_k"), py::arg("max_q"), py::arg("max_k"), py::arg("dropout_p"),
      py::arg("is_causal"), py::arg("philox_seed"), py::arg("philox_offset"), py::kw_only(),
      py::arg("scale") = py::none());
  m.def("device_mm", &device_mm, "The device's mm on host tensors", py::arg("self"), py::arg("mat2"));
  m.def(
      "device_addmm",
      [](const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const py::handle& beta,
         const py::handle& alpha) { return device_addmm(self, mat1, mat2, scalar_of(beta), scalar_of(alpha)); },
      "The device's addmm on host tensors", py::arg("self"), py::arg("mat1"), py::arg("mat2"), py::kw_only(),
      py::arg("beta") = 1, py::arg("alpha") = 1);
  m.def("device_bmm", &device_bmm, "The device's bmm on host tensors", py::arg("self"), py::arg("mat2"));
  m.def(
      "device_baddbmm",
      [](const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const py::handle& beta,
         const py::handle& alpha) { return device_baddbmm(self, batch1, batch2, scalar_of(beta), scalar_of(alpha)); },
      "The device's baddbmm on host tensors", py::arg("self"), py::arg("batch1"), py::arg("batch2"), py::kw_only(),
      py::arg("beta") = 1, py::arg("alpha") = 1);
  m.def("composite_explicit_overloads", &composite_explicit_overloads);
  m.def("record_op", &record_op, py::arg("name"), py::arg("fallback"));
  m.def("tracked_ops", &tracked_ops, "Sorted names of the ops executed (or, fallback=True, fallen back)",
        py::arg("fallback"));
  m.def("clear_tracking", &clear_tracking);
  m.def("neff_hits", &neff_hits, "NEFF-cache hits counted by the native per-op path");
  m.def("neff_forget", &neff_forget, "Forget the native path's NEFF signatures and hits");
  m.def("slow_calls", &slow_calls, "Calls that took the Python path, per overload");
  m.def("call_rule", &call_rule, "Whether input-aware rule `name` fires on a call of `qualified` (arguments by name)",
        py::arg("name"), py::arg("qualified"), py::arg("call"));
  m.def("call_rule_names", &call_rule_names, "The input-aware rules the runtime defines");
  m.def("route_to_python", &route_to_python, py::arg("reason"), py::arg("on"));
  py::class_<PythonCall>(m, "PythonCall", "One call of kernel.py's Python path, with the native path's mechanics")
      .def(py::init<const std::string&, const py::list&>(), py::arg("qualified"), py::arg("values"))
      .def("key", &PythonCall::key, "The call's NEFF key (bytes), None when nothing compiles")
      .def("narrowed", &PythonCall::narrowed, "The arguments 64-bit narrowed as the device computes them",
           py::arg("values"))
      .def("restored", &PythonCall::restored, "The op's result restored; written arguments get theirs back",
           py::arg("result"));
  m.def("device_results", &device_results, "A Python-path call's result mapped back to the device",
        py::arg("qualified"), py::arg("result"), py::arg("values"), py::arg("target"));
}
