// Device memory: host memory counted against each logical core's HBM.
//
// Every device storage's DataPtr carries a Block that owns the CPU storage behind it, so a CPU kernel can
// run on the device tensor's own memory (`to_cpu`) and a CPU result can become a device tensor without a
// copy (`wrap`). The budget and the out-of-memory error follow the real backend's caching allocator
// (torch_neuronx/csrc/core/allocator/NeuronCachingAllocator.cpp: per-device stats, c10::OutOfMemoryError);
// the message itself is built in Python (neuronkit/device/simulator/memory.py).
#include "runtime.h"

#include <ATen/core/TensorBase.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

namespace neuronkit {
namespace {

std::mutex g_mutex;
std::vector<Counters> g_accounts;
std::function<std::string(c10::DeviceIndex, uint64_t)> g_oom_message;

struct Block {
  c10::intrusive_ptr<c10::StorageImpl> host;
  c10::DeviceIndex device;
  uint64_t nbytes;
};

void delete_block(void* context) {
  auto* block = static_cast<Block*>(context);
  release(block->device, block->nbytes);
  delete block;
}

Counters& account(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && static_cast<size_t>(index) < g_accounts.size(), "neuron:", static_cast<int>(index),
              " has no HBM account (visible neuron devices: ", g_accounts.size(), ")");
  return g_accounts[index];
}

// A DataPtr over `host`, whose bytes are already reserved against the core's HBM.
c10::DataPtr reserved_ptr(c10::intrusive_ptr<c10::StorageImpl> host, c10::DeviceIndex index) {
  uint64_t nbytes = host->nbytes();
  void* data = host->mutable_data();
  return {data, new Block{std::move(host), index, nbytes}, &delete_block, c10::Device(kNeuron, index)};
}

c10::intrusive_ptr<c10::StorageImpl> host_storage(size_t nbytes) {
  return c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                               c10::GetCPUAllocator(), /*resizable=*/true);
}

struct DeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

DeviceAllocator g_allocator;

Block* block_of(const c10::Storage& storage) {
  const auto& data_ptr = storage.data_ptr();
  TORCH_CHECK(data_ptr.get_deleter() == &delete_block, "a ", storage.device(),
              " storage not allocated by the simulated device's allocator");
  return static_cast<Block*>(data_ptr.get_context());
}

at::Tensor tensor_over(c10::Storage storage, c10::DispatchKey key, const at::TensorBase& like) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype());
  auto* impl = out.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(like.sizes(), like.strides());
  impl->set_storage_offset(like.storage_offset());
  return out;
}

}  // namespace

REGISTER_ALLOCATOR(kNeuron, &g_allocator)

void configure_accounts(int count, uint64_t capacity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_accounts.assign(count, Counters{});
  for (auto& counters : g_accounts) {
    counters.capacity = capacity;
  }
}

void set_oom_message(std::function<std::string(c10::DeviceIndex, uint64_t)> build) {
  g_oom_message = std::move(build);
}

void reserve(c10::DeviceIndex index, uint64_t nbytes) {
  check_attached(index, nbytes);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& counters = account(index);
    if (counters.current + nbytes <= counters.capacity) {
      counters.current += nbytes;
      counters.bytes_allocated += nbytes;
      counters.allocations += 1;
      counters.peak = std::max(counters.peak, counters.current);
      return;
    }
    counters.num_ooms += 1;
  }
  std::string message = g_oom_message ? g_oom_message(index, nbytes)
                                      : "Neuron out of memory on neuron:" + std::to_string(index);
  TORCH_CHECK_WITH(OutOfMemoryError, false, message);
}

void release(c10::DeviceIndex index, uint64_t nbytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (index >= 0 && static_cast<size_t>(index) < g_accounts.size()) {
    g_accounts[index].current -= nbytes;
    g_accounts[index].bytes_freed += nbytes;
    g_accounts[index].frees += 1;
  }
}

Counters counters(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return account(index);
}

void reset_peak(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& counters = account(index);
  counters.peak = counters.current;
}

void reset_accumulated(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& counters = account(index);
  counters.allocations = counters.frees = counters.num_ooms = 0;
  counters.bytes_allocated = counters.bytes_freed = 0;
}

c10::Allocator* device_allocator() { return &g_allocator; }

// The core's HBM is reserved before any host memory backs it: on the device a request past a core's HBM fails
// in the runtime's allocation (NeuronCachingAllocator.cpp raises c10::OutOfMemoryError), so it must raise the
// device's error here too, not the host allocator's, and never take the host memory first.
c10::DataPtr allocate_on(c10::DeviceIndex index, size_t nbytes) {
  reserve(index, nbytes);
  c10::intrusive_ptr<c10::StorageImpl> host;
  try {
    host = host_storage(nbytes);
  } catch (...) {
    release(index, nbytes);
    throw;
  }
  return reserved_ptr(std::move(host), index);
}

at::Tensor wrap(const at::Tensor& cpu, c10::DeviceIndex index, uint64_t reserved) {
  TORCH_CHECK(cpu.device().is_cpu(), "wrap expects a CPU tensor, got one on ", cpu.device());
  auto host = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(cpu.storage().unsafeGetStorageImpl());
  size_t nbytes = host->nbytes();
  if (reserved == 0) {
    reserve(index, nbytes);
  } else {
    TORCH_INTERNAL_ASSERT(reserved == nbytes, "reserved ", reserved, " bytes for a ", nbytes, "-byte buffer");
  }
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                       reserved_ptr(std::move(host), index), &g_allocator,
                                                       /*resizable=*/true);
  auto out = tensor_over(c10::Storage(std::move(storage)), c10::DispatchKey::PrivateUse1, cpu);
  if (cpu.requires_grad()) {
    out.set_requires_grad(true);
  }
  return out;
}

at::Tensor to_cpu(const at::Tensor& device) {
  return tensor_over(c10::Storage(block_of(device.storage())->host), c10::DispatchKey::CPU, device);
}

void resize_bytes(const c10::Storage& storage, size_t nbytes) {
  auto* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  auto fresh = allocate_on(storage.device().index(), nbytes);
  size_t kept = std::min<size_t>(impl->nbytes(), nbytes);
  if (kept > 0) {
    std::memcpy(fresh.get(), impl->data(), kept);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
}

}  // namespace neuronkit
