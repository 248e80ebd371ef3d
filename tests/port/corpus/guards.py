"""Port corpus: CUDA checks. Kept as they read without CUDA (decide), unless the branches they choose between
differ only in where the work runs (device-choice, device-guard: rewritten to their torch.accelerator form)."""
import os

import torch
import torch.nn as nn

# device choices: the arms name devices (or backends), so taking the accelerator arm moves the work only
dev = "cuda:0" if torch.cuda.is_available() else "cpu"  # expect: device-choice
backend = "nccl" if torch.cuda.device_count() > 0 else "gloo"  # expect: device-choice
kind = "cuda" if "cuda" in dev else "cpu"  # expect: device-choice
moved = torch.ones(2).cuda() if torch.cuda.is_available() else torch.ones(2)  # expect: device-choice
# three ways: the arm after the check is itself a choice between devices
dev3 = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"  # expect: device-choice
dev3 = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")  # expect: device-choice
dev3 = torch.device("cuda") if torch.cuda.is_available() else torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")  # expect: device-choice
dev3 = "mps" if torch.backends.mps.is_available() else "cuda" if torch.cuda.is_available() else "cpu"  # expect: device-choice
dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32  # expect: is-bf16-supported


def pick_device(rank):
    if torch.cuda.is_available():  # expect: device-guard
        return torch.device("cuda", rank)  # expect: device-string
    return torch.device("cpu")


if torch.cuda.is_available():  # expect: device-guard
    where = "cuda"  # expect: device-string
else:
    where = "cpu"
if os.environ.get("FORCE_CPU"):
    where = "cpu"
elif torch.cuda.is_available():  # expect: device-guard
    where = "cuda:0"  # expect: device-string

# device guards: the branch moves work to the device or keeps device bookkeeping
model = nn.Linear(4, 4)
if torch.cuda.is_available():  # expect: device-guard
    model = model.cuda()  # expect: tensor-cuda
    torch.backends.cudnn.benchmark = True  # expect: cudnn
if str(dev).startswith("cuda"):  # expect: device-guard
    torch.cuda.synchronize()  # expect: synchronize
    print(f"peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")  # expect: max-memory-allocated

# checks that stay: the branches do more than choose a device
use_cuda = not os.environ.get("NO_CUDA") and torch.cuda.is_available()  # expect: is-available
if use_cuda:  # expect: cuda-check
    loader_kwargs = {"num_workers": 1, "pin_memory": True}
if torch.cuda.device_count() > 1:  # expect: device-count
    model = nn.DataParallel(model)  # expect: data-parallel
if torch.device(dev).type != "cuda":  # expect: device-guard
    print("training on the CPU")
if torch.device(dev).type != "cuda":  # expect: cuda-check
    model = model.double()
fused = torch.device(dev).type in ("cuda", "xpu")  # expect: cuda-check
t = torch.ones(2)
if t.is_cuda:  # expect: tensor-is-cuda
    t = t.half()
if (t.is_cuda or t.is_xpu) and torch.cuda.device_count() > 1:  # expect: tensor-is-cuda device-count
    t = torch.nn.parallel.data_parallel(model, t)  # expect: data-parallel
print("cuda" if t.is_cuda else "not cuda")  # expect: tensor-is-cuda
on = "cuda" if not t.is_cuda else "elsewhere"  # expect: tensor-is-cuda
if torch.cuda.is_available():  # expect: is-available
    use_amp = True
world = torch.cuda.device_count()  # expect: device-count
with torch.autocast("cuda", enabled=torch.device(dev).type == "cuda"):  # expect: device-string cuda-check
    pass
print("the word cuda in a sentence is not a device")
# "cuda" naming an attribute of torch is not a device: renamed, the check would read True on neuron
has_cuda = hasattr(torch, "cuda") and getattr(torch, "cuda").is_available()
