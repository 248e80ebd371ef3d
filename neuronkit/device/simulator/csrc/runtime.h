// The simulated neuron device's native runtime: what PyTorch needs from a C++ PrivateUse1 backend.
//
// Layout follows PyTorch's reference out-of-tree backend, OpenReg (pytorch/pytorch
// test/cpp_extensions/open_registration_extension/torch_openreg/csrc/runtime): a device guard, hooks with
// generators, a device allocator and a host (pinned) allocator. Device memory is host memory: every device
// storage is backed by a CPU storage, so CPU kernels run on it without copies.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include <cstdint>
#include <functional>
#include <string>

namespace neuronkit {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// device.cpp: the visible logical cores and each thread's current one.
int device_count() noexcept;            // up to 128 (trn2 with LNC=1); the local world size once placed
c10::DeviceIndex guard_device_count() noexcept;  // the same, capped at 127: c10::DeviceIndex is int8
void set_device_count(int count);
c10::DeviceIndex current_device() noexcept;
void set_device(c10::DeviceIndex index);  // checked
c10::DeviceIndex exchange_device(c10::DeviceIndex index);
void check_index(c10::DeviceIndex index);
// Place this process as the real backend's process group does: local world size and its first core.
void place_process(int local_world_size, int local_rank);
// Device memory on `index` must belong to this process once placed (throws the runtime's errors).
void check_attached(c10::DeviceIndex index, uint64_t nbytes);

// allocator.cpp: per-core HBM accounting over host memory.
struct Counters {
  uint64_t capacity = 0, current = 0, peak = 0;
  int64_t allocations = 0, frees = 0, num_ooms = 0;
  uint64_t bytes_allocated = 0, bytes_freed = 0;  // cumulative: the real stats' allocated and freed
};
void configure_accounts(int count, uint64_t capacity);
void set_oom_message(std::function<std::string(c10::DeviceIndex, uint64_t)> build);
void reserve(c10::DeviceIndex index, uint64_t nbytes);  // throws c10::OutOfMemoryError when the core is full
void release(c10::DeviceIndex index, uint64_t nbytes);
Counters counters(c10::DeviceIndex index);
void reset_peak(c10::DeviceIndex index);
void reset_accumulated(c10::DeviceIndex index);

c10::Allocator* device_allocator();
c10::DataPtr allocate_on(c10::DeviceIndex index, size_t nbytes);
// A device tensor over a CPU tensor's memory; `reserved`: its bytes were already reserved on the core (0: reserve now).
at::Tensor wrap(const at::Tensor& cpu, c10::DeviceIndex index, uint64_t reserved = 0);
at::Tensor to_cpu(const at::Tensor& device);                    // a CPU tensor over a device tensor's memory
void resize_bytes(const c10::Storage& storage, size_t nbytes);

// host_allocator.cpp: pinned host memory, as the real backend's NeuronHostAllocator hands out.
c10::Allocator* pinned_allocator();
bool is_pinned(const void* ptr);

// generator.cpp: one default generator per core, and new ones.
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
// Run a random op's host kernel for `source`: a core's default generator draws from the host's default
// generator (S's CPU fallback); an explicit device generator through a host generator keyed by its
// (seed, offset), whose offset then moves on, leaving the host generator's own state restored.
void lend_generator(const at::Generator& source, const std::function<void()>& run);

// hooks.cpp
void register_hooks();

}  // namespace neuronkit
