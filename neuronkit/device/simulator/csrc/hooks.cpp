// PrivateUse1HooksInterface for `neuron`: availability, the current device, generators, pinned memory and
// storage resize (`UntypedStorage.resize_`, which FSDP2 uses to free and re-materialise parameters).
// Real backend: torch_neuronx/csrc/core/NeuronHooksInterface.{h,cpp}; shape after OpenReg's OpenRegHooks.h.
#include "runtime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <mutex>

namespace neuronkit {
namespace {

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }

  bool isAvailable() const override { return device_count() > 0; }

  bool hasPrimaryContext(c10::DeviceIndex index) const override { return index >= 0 && index < device_count(); }

  c10::DeviceIndex deviceCount() const override { return guard_device_count(); }

  void setCurrentDevice(c10::DeviceIndex index) const override { set_device(index); }

  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override { return exchange_device(index); }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return index >= 0 && index < device_count() ? exchange_device(index) : current_device();
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex index) const override { return new_generator(index); }

  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }

  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_bytes(storage, nbytes);
  }
};

}  // namespace

void register_hooks() {
  static std::once_flag once;
  std::call_once(once, [] { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); });
}

}  // namespace neuronkit
