"""Port corpus: device strings, .cuda(), and torch.cuda calls with a torch.neuron counterpart.
Each line a rule matches ends in an "expect" comment naming the rule ids (tests/port/test_port.py checks both ways)."""
import os

import torch

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # expect: device-choice
model = torch.nn.Linear(4, 4).cuda()  # expect: tensor-cuda
x = torch.ones(2, 4).cuda(0)  # expect: tensor-cuda
y = torch.ones(2, 4).cuda(local_rank, non_blocking=True)  # expect: tensor-cuda non-blocking
z = torch.zeros(2, device="cuda:1")  # expect: device-string
w = torch.zeros(2).to(f"cuda:{local_rank}")  # expect: device-string
if x.is_cuda:  # expect: device-guard
    print(torch.cuda.device_count(), torch.cuda.current_device())  # expect: device-count current-device
torch.cuda.set_device(local_rank)  # expect: set-device
with torch.cuda.device(0):  # expect: device-context
    print(torch.cuda.get_device_name(0))  # expect: get-device-name
print(torch.cuda.get_device_properties(0).total_memory)  # expect: get-device-properties
torch.cuda.synchronize()  # expect: synchronize
torch.cuda.empty_cache()  # expect: empty-cache
print(torch.cuda.is_bf16_supported())  # expect: is-bf16-supported
torch.distributed.init_process_group(backend="nccl")  # expect: nccl-backend
print("the cuda word inside a sentence is left alone")
torch.distributed.init_process_group(backend=torch.distributed.Backend.NCCL)  # expect: nccl-backend-enum
print(torch.distributed.Backend.GLOO)
d1 = "cuda:%d" % local_rank  # expect: device-string
d2 = "cuda:{}".format(local_rank)  # expect: device-string
d3 = "cuda:" + str(local_rank)  # expect: device-string
d4 = "cpu:%d" % local_rank
