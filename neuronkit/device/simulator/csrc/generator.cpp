// Random number generators of the neuron device: one default generator per logical core, and new ones for
// `torch.Generator(device='neuron:N')`. As the real backend's (torch_neuronx/csrc/core/NeuronHooksInterface.cpp:
// 17-98), a generator is Philox-style bookkeeping: a seed and an offset, a 16-byte state (seed uint64, offset
// int64; an 8-byte state sets the seed and a zero offset), `set_current_seed` resets the offset, and each
// core's default generator is seeded at random on first use (:114-127). PyTorch's DTensor RNG tracker
// (FSDP2/TP random init) reads and moves the offset through this state.
//
// Random ops on the real device are CPU fallbacks that draw from the host's default generator (the
// backend's tests/device/test_rng_state.py marks device/host independence xfail for that reason), so a
// default device generator's draw is the host generator's draw. An explicit device generator passed to a
// random op has no modelled outcome in the source; here the host kernel draws from a host generator keyed
// by its (seed, offset), and the offset moves on by one Philox block (4) per draw (known difference).
#include "runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace neuronkit {
namespace {

constexpr int64_t kSeedBytes = sizeof(uint64_t);
constexpr int64_t kStateBytes = kSeedBytes + sizeof(int64_t);
constexpr uint64_t kPhiloxBlock = 4;

struct NeuronGenerator final : c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

  static c10::DeviceType device_type() { return kNeuron; }

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }

  uint64_t seed() override {
    auto random = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(random);
    return random;
  }

  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = at::detail::empty_cpu({kStateBytes}, at::ScalarType::Byte, std::nullopt, std::nullopt,
                                       std::nullopt, std::nullopt);
    auto* bytes = static_cast<uint8_t*>(state.data_ptr());
    auto offset = static_cast<int64_t>(offset_);
    std::memcpy(bytes, &seed_, kSeedBytes);
    std::memcpy(bytes + kSeedBytes, &offset, sizeof(offset));
    return state.getIntrusivePtr();
  }

  void set_state(const c10::TensorImpl& new_state) override {
    auto size = new_state.numel();
    TORCH_CHECK(size == kStateBytes || size == kSeedBytes, "RNG state is wrong size");
    auto* bytes = static_cast<const uint8_t*>(new_state.data());
    std::memcpy(&seed_, bytes, kSeedBytes);
    int64_t offset = 0;
    if (size == kStateBytes) std::memcpy(&offset, bytes + kSeedBytes, sizeof(offset));
    offset_ = static_cast<uint64_t>(offset);
  }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* copy = new NeuronGenerator(device_.index());
    copy->seed_ = seed_;
    copy->offset_ = offset_;
    return copy;
  }

  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
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

bool is_default(const at::Generator& generator) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& known : g_defaults) {
    if (known.defined() && known == generator) return true;
  }
  return false;
}

}  // namespace

void lend_generator(const at::Generator& source, const std::function<void()>& run) {
  if (is_default(source)) {
    run();  // a CPU fallback: the host's default generator draws
    return;
  }
  auto host = at::detail::getDefaultCPUGenerator();
  auto saved = host.get_state();
  auto* impl = const_cast<at::Generator&>(source).unsafeGetGeneratorImpl();
  uint64_t offset = impl->get_offset();
  host.set_current_seed(impl->current_seed() + offset * 0x9E3779B97F4A7C15ULL);
  auto give_back = [&] {
    impl->set_offset(offset + kPhiloxBlock);
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
