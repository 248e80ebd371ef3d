"""Port corpus: names reached through imports and aliases, flags, unknown torch.cuda attributes."""
import torch
import torch.backends.cudnn as cudnn
import torch.cuda as tc
from torch import cuda  # expect: cuda-module
from torch.cuda import empty_cache, synchronize  # expect: empty-cache synchronize
from torch.utils.data import DataLoader

synchronize()
empty_cache()
tc.synchronize()  # expect: synchronize
cuda.manual_seed(1)  # expect: manual-seed
cudnn.benchmark = True  # expect: cudnn
torch.backends.cudnn.deterministic = True  # expect: cudnn
torch.backends.cuda.matmul.allow_tf32 = True  # expect: cuda-backend-flags
print(torch.cuda.utilization())  # expect: cuda-unknown
torch.cuda.ipc_collect()  # expect: cuda-unknown
device_module = torch.cuda  # expect: cuda-module
loader = DataLoader([1, 2, 3], batch_size=2, pin_memory=True)  # expect: pin-memory
pinned = torch.ones(2).pin_memory()  # expect: pin-memory-method
moved = pinned.to("cuda", non_blocking=True)  # expect: device-string non-blocking
