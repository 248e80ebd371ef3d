"""Port corpus: what the simulated device itself rejects, and what a rewrite keeps working."""
import os

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from transformers import TrainingArguments

model = torch.nn.Linear(4, 4)
model = torch.nn.DataParallel(model)  # expect: data-parallel
state = torch.load("checkpoint.pt")  # expect: torch-load
state = torch.load("checkpoint.pt", map_location="cpu")
state = torch.load("checkpoint.pt", "cpu")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:  # expect: profiler-cuda
    pass
acts = [torch.profiler.ProfilerActivity.CUDA]  # expect: profiler-cuda
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # expect: cuda-visible-devices
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")  # expect: cuda-visible-devices
env = {"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "1"}  # expect: cuda-visible-devices
visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")  # expect: cuda-visible-devices
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))  # expect: nccl-backend device-id device-string
compiled = torch.compile(model)  # expect: compile-backend
lstm = torch.nn.LSTM(8, 8)  # expect: rnn-layers
gru = torch.nn.GRUCell(8, 8)  # expect: rnn-layers
major, minor = torch.cuda.get_device_capability()  # expect: get-device-capability
device_type = torch.accelerator.current_accelerator().type
scaler = torch.amp.GradScaler(device_type)  # the device named at run time: device-agnostic already


@torch.compile  # expect: compile-backend
def fused(x):
    return x * 2


@torch.compile(fullgraph=True)  # expect: compile-backend
def fused_graph(x):
    return x * 2
conv = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)  # expect: channels-last
images = torch.empty(2, 3, 8, 8, memory_format=torch.channels_last)  # expect: channels-last
images = images.contiguous(memory_format=torch.channels_last_3d)  # expect: channels-last
images = images.contiguous(memory_format=torch.contiguous_format)
args = TrainingArguments(output_dir="out", tf32=True, bf16=True)  # expect: hf-tf32
args = TrainingArguments(output_dir="out", tf32=False)
