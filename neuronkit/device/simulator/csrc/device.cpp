// Device count, the current device per thread, and the device guard PyTorch uses for `neuron`.
// Real backend: torch_neuronx/csrc/core/NeuronGuardImpl.{h,cpp} (snapshot parmoham-aws/test-repo-parmoham);
// the guard shape follows OpenReg's csrc/runtime/OpenRegGuard.h. The simulated device runs every op when it
// is issued, so streams are the default stream and events are complete as soon as they are recorded.
#include "runtime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>

namespace neuronkit {
namespace {

std::atomic<int> g_count{0};
thread_local c10::DeviceIndex t_current = 0;

}  // namespace

int device_count() noexcept { return g_count.load(); }

// The real guard casts its count to int8, so 128 cores wrap to -128 (torch_neuronx/csrc/core/
// NeuronGuardImpl.h, deviceCount); PyTorch is given the largest count it can hold instead.
c10::DeviceIndex guard_device_count() noexcept {
  return static_cast<c10::DeviceIndex>(std::min(g_count.load(), 127));
}

void set_device_count(int count) { g_count.store(count); }

c10::DeviceIndex current_device() noexcept { return t_current; }

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK_VALUE(index >= 0 && index < device_count(), "Invalid device id: ", static_cast<int>(index),
                    " (visible neuron devices: ", device_count(), ")");
}

void set_device(c10::DeviceIndex index) {
  check_index(index);
  t_current = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  auto previous = t_current;
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

  void setDevice(c10::Device d) const override { set_device(d.index()); }

  void uncheckedSetDevice(c10::Device d) const noexcept override { t_current = d.index(); }

  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }

  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
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
