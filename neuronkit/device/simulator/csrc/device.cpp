// Device count, the current device per thread, the process's placement, and the device guard PyTorch uses
// for `neuron`. Real backend (S = snapshot parmoham-aws/test-repo-parmoham): torch_neuronx/csrc/core/
// NeuronGuardImpl.{h,cpp} and NeuronDevice.cpp; the guard shape follows OpenReg's csrc/runtime/OpenRegGuard.h.
//
// Placement (S NeuronDevice.cpp set_local_world_size / set_local_device_start_index, called by
// distributed/backend.py _neuron_runtime_setup): under torchrun each process sees one core
// (NEURON_RT_VISIBLE_CORES=<local rank>); afterwards device_count() is the local world size, the process
// (and every thread that has not chosen a device) is on neuron:<local rank>, set_device accepts that core
// only, and device memory on any other index fails as get_vnc_id / the runtime's allocation make it fail. The simulated device runs every op when it
// is issued, so streams are the default stream and events are complete as soon as they are recorded.
#include "runtime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>

namespace neuronkit {
namespace {

std::atomic<int> g_count{0};      // visible logical cores (the runtime's vnc count) before placement
std::atomic<int> g_local_world{-1};  // processes on this node, once placed (S local_world_size)
std::atomic<int> g_local_start{-1};  // this process's first core, once placed (S local_device_start_index)
// The device of a thread that never chose one: the placed core (S global_default_device); -1 means
// neuron:0. (S also makes the first core any thread sets the default; not modelled: docs/fidelity.md.)
std::atomic<int> g_default{-1};
thread_local int t_current = -1;  // -1: this thread has not chosen a device

// Cores this process may use: [start, start + visible).
int local_start() noexcept { return std::max(g_local_start.load(), 0); }
int visible_cores() noexcept { return g_local_world.load() >= 0 ? 1 : g_count.load(); }

}  // namespace

int device_count() noexcept {
  int world = g_local_world.load();
  return world >= 0 ? world : g_count.load();
}

// The real guard casts its count to int8, so 128 cores wrap to -128 (torch_neuronx/csrc/core/
// NeuronGuardImpl.h, deviceCount); PyTorch is given the largest count it can hold instead.
c10::DeviceIndex guard_device_count() noexcept {
  return static_cast<c10::DeviceIndex>(std::min(device_count(), 127));
}

void set_device_count(int count) { g_count.store(count); }

c10::DeviceIndex current_device() noexcept {
  if (t_current >= 0) return static_cast<c10::DeviceIndex>(t_current);
  return static_cast<c10::DeviceIndex>(std::max(g_default.load(), 0));
}

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK_VALUE(index >= 0 && index < device_count(), "Invalid device id: ", static_cast<int>(index),
                    " (visible neuron devices: ", device_count(), ")");
}

void set_device(c10::DeviceIndex index) {
  check_index(index);
  const int start = local_start(), count = visible_cores();
  TORCH_CHECK_VALUE(index >= start && index < start + count, "Device index ", static_cast<int>(index),
                    " is out of range. Valid range is ", start, " to ", start + count - 1, " for this process");
  t_current = index;
}

void place_process(int local_world_size, int local_rank) {
  TORCH_CHECK_VALUE(local_world_size > 0 && local_world_size <= g_count.load(), "local world size ",
                    local_world_size, " exceeds the ", g_count.load(), " simulated cores");
  TORCH_CHECK(g_local_world.load() < 0, "Attempted to reset local_world_size");
  TORCH_CHECK_VALUE(local_rank >= 0 && local_rank < local_world_size, "local device start index ", local_rank,
                    " is out of range. Valid range is 0 to ", local_world_size - 1);
  g_local_world.store(local_world_size);
  g_local_start.store(local_rank);
  t_current = local_rank;
  g_default.store(local_rank);
}

void check_attached(c10::DeviceIndex index, uint64_t nbytes) {
  const int world = g_local_world.load(), start = local_start();
  if (world < 0 || nbytes == 0) return;  // not placed; an empty allocation asks the runtime for nothing
  TORCH_CHECK_VALUE(index < world, "Device index ", static_cast<int>(index), " is out of range. Valid range is 0 to ",
                    world - 1);
  TORCH_CHECK_VALUE(index >= start, "Attempted to access device that doesn't attach to this process, received ",
                    static_cast<int>(index), " expected to be equal or greater than ", start);
  // The core's runtime index (index - start) is past the one core this process sees: the runtime's
  // allocation fails (S allocator/NeuronCachingAllocator.cpp AllocateWithRetry).
  TORCH_CHECK(index - start < visible_cores(), "NRT allocation failed for size ", nbytes, " (neuron:",
              static_cast<int>(index), " is another process's core: this process sees neuron:", start, " only)");
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  auto previous = current_device();
  if (index != previous) {
    set_device(index);
  }
  return previous;
}

namespace {

struct NeuronGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    return {kNeuron, exchange_device(d.index())};
  }

  c10::Device getDevice() const override { return {kNeuron, current_device()}; }

  // The autograd engine's per-device worker threads call setDevice for every index below deviceCount()
  // (torch/csrc/autograd/engine.cpp set_device): the index is checked against the count, not against this
  // process's placement, which S's guard would throw for in another rank's thread
  // (docs/fidelity.md). `set_device` and exchangeDevice (DeviceGuard, `with torch.device`) check both.
  void setDevice(c10::Device d) const override {
    check_index(d.index());
    t_current = d.index();
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override { t_current = d.index(); }

  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }

  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }

  // A pooled stream (what Future.then asks for, so every DDP communication hook) is refused as S's own DDP
  // tests record it (tests/pytorch_tests/specs/ddp_spec.json:113,149, "[TODO-FIX post Beta]"), although S's
  // guard header would create one: the recorded failure is what a team meets on the device.
  c10::Stream getStreamFromGlobalPool(c10::Device /*d*/, bool /*high_priority*/) const override {
    TORCH_CHECK(false, "Neuron backend doesn't support acquiring a stream from pool");
  }

  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override { return c10::Stream(c10::Stream::DEFAULT, d); }

  c10::Stream exchangeStream(c10::Stream s) const override { return s; }

  c10::DeviceIndex deviceCount() const noexcept override { return guard_device_count(); }

  // Events: work is complete when it is issued, so recording marks the event done and waiting returns.
  void record(void** event, const c10::Stream& /*stream*/, const c10::DeviceIndex /*index*/,
              const c10::EventFlag /*flag*/) const override {
    *event = reinterpret_cast<void*>(1);
  }

  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* /*event*/) const override { return true; }

  void destroyEvent(void* /*event*/, const c10::DeviceIndex /*index*/) const noexcept override {}

  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }

  void synchronizeStream(const c10::Stream& /*stream*/) const override {}

  void synchronizeEvent(void* /*event*/) const override {}

  void synchronizeDevice(const c10::DeviceIndex /*index*/) const override {}

  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuard)

}  // namespace
}  // namespace neuronkit
