"""Port corpus: memory statistics and random number generators."""
import torch

torch.cuda.manual_seed(0)  # expect: manual-seed
torch.cuda.manual_seed_all(0)  # expect: manual-seed-all
torch.cuda.seed()  # expect: seed
torch.cuda.seed_all()  # expect: seed-all
print(torch.cuda.initial_seed())  # expect: initial-seed
state = torch.cuda.get_rng_state()  # expect: get-rng-state
torch.cuda.set_rng_state(state)  # expect: set-rng-state
states = torch.cuda.get_rng_state_all()  # expect: rng-state-all
torch.cuda.set_rng_state_all(states)  # expect: rng-state-all
print(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())  # expect: memory-allocated max-memory-allocated
print(torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved())  # expect: memory-reserved memory-reserved
print(torch.cuda.memory_stats()["allocated_bytes.all.peak"])  # expect: memory-stats
torch.cuda.reset_peak_memory_stats()  # expect: reset-peak-memory-stats
print(torch.cuda.memory_summary())  # expect: memory-summary
free, total = torch.cuda.mem_get_info()  # expect: mem-get-info
try:
    big = torch.empty(2**40, device="cuda")  # expect: device-string
except torch.cuda.OutOfMemoryError:  # expect: cuda-oom
    pass
gen = torch.Generator(device="cuda")  # expect: generator-device
gen_core = torch.Generator("cuda:0")  # expect: generator-device
gen_ported = torch.Generator(device="neuron")  # expect: generator-device
gen_cpu = torch.Generator(device="cpu")
gen_default = torch.Generator().manual_seed(0)
gen_at_run_time = torch.Generator(device=torch.device("cuda", 0))  # expect: generator-device device-string
# torch.accelerator's memory queries raise on the device (S's allocator is not a DeviceAllocator)
torch.accelerator.empty_cache()  # expect: accelerator-empty-cache
print(torch.accelerator.memory_allocated())  # expect: accelerator-memory-allocated
print(torch.accelerator.max_memory_allocated())  # expect: accelerator-max-memory-allocated
torch.accelerator.reset_peak_memory_stats()  # expect: accelerator-reset-peak-memory-stats
print(torch.accelerator.memory_stats(), torch.accelerator.get_memory_info())  # expect: accelerator-memory-other accelerator-memory-other
