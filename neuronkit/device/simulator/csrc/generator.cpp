// Random number generators of the neuron device: one default generator per logical core, and new ones for
// `torch.Generator(device='neuron:N')`. The real backend keeps per-device default generators seeded at
// random on first use (torch_neuronx/csrc/core/NeuronHooksInterface.cpp, getDefaultNeuronGenerator); its
// declared generator type derives from the CPU one (torch_neuronx/csrc/core/NeuronGenerator.h), as this one
// does, so a CPU kernel can draw from a copy of its state (the per-op kernel lends it).
#include "runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <vector>

namespace neuronkit {
namespace {

struct NeuronGenerator final : at::CPUGeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex index) {
    device_ = c10::Device(kNeuron, index);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }

  static c10::DeviceType device_type() { return kNeuron; }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* copy = new NeuronGenerator(device_.index());
    copy->set_state(*get_state());
    return copy;
  }
};

std::mutex g_mutex;
std::vector<at::Generator> g_defaults;

c10::DeviceIndex resolve(c10::DeviceIndex index) {
  if (index < 0) {
    return current_device();
  }
  check_index(index);
  return index;
}

}  // namespace

void lend_generator(const at::Generator& source, const std::function<void()>& run) {
  auto host = at::detail::getDefaultCPUGenerator();
  auto saved = host.get_state();
  host.set_state(source.get_state());
  auto give_back = [&] {
    const_cast<at::Generator&>(source).set_state(host.get_state());
    host.set_state(saved);
  };
  try {
    run();
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  index = resolve(index);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_defaults.size() < static_cast<size_t>(device_count())) {
    g_defaults.resize(device_count());
  }
  auto& generator = g_defaults[index];
  if (!generator.defined()) {
    generator = at::make_generator<NeuronGenerator>(index);
    generator.seed();
  }
  return generator;
}

at::Generator new_generator(c10::DeviceIndex index) { return at::make_generator<NeuronGenerator>(resolve(index)); }

}  // namespace neuronkit
