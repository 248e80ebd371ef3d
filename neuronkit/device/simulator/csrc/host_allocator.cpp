// Pinned host memory: `pin_memory()` for the neuron device allocates here, and `is_pinned()` asks here.
// Real backend: torch_neuronx/csrc/core/allocator/NeuronHostAllocator.{h,cpp}; shape after OpenReg's
// csrc/runtime/OpenRegHostAllocator.h. The simulated device copies from any host memory, so "pinned" means
// owned and tracked by this allocator; the pages are not locked.
#include "runtime.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace neuronkit {
namespace {

std::mutex g_mutex;
std::map<uintptr_t, size_t> g_live;  // start address -> size of each live pinned block

void free_pinned(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_live.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  c10::free_cpu(ptr);
}

struct PinnedAllocator final : at::HostAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nbytes > 0 ? c10::alloc_cpu(nbytes) : nullptr;
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_live[reinterpret_cast<uintptr_t>(ptr)] = nbytes;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override { return true; }

  void empty_cache() override {}

  at::HostStats get_stats() override { return {}; }

  void reset_accumulated_stats() override {}

  void reset_peak_stats() override {}
};

PinnedAllocator g_pinned;

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned)

c10::Allocator* pinned_allocator() { return &g_pinned; }

bool is_pinned(const void* ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto next = g_live.upper_bound(address);
  if (next == g_live.begin()) {
    return false;
  }
  auto block = std::prev(next);
  return address < block->first + block->second;
}

}  // namespace neuronkit
