"""Port corpus: mixed precision."""
import torch
from torch.cuda.amp import GradScaler, autocast  # expect: grad-scaler cuda-amp-autocast

scaler = torch.cuda.amp.GradScaler()  # expect: grad-scaler
scaler2 = torch.amp.GradScaler("cuda")  # expect: grad-scaler device-string
scaler3 = GradScaler(enabled=False)  # expect: grad-scaler
scaler4 = torch.amp.GradScaler("neuron")  # already ported: no finding
scaler5 = torch.amp.GradScaler(device="neuron", enabled=True)
with torch.cuda.amp.autocast(dtype=torch.bfloat16):  # expect: cuda-amp-autocast
    pass
with torch.autocast("cuda", dtype=torch.bfloat16):  # expect: device-string
    pass
with torch.autocast(device_type="cuda"):  # expect: device-string
    pass
with autocast():  # expect: cuda-amp-autocast
    pass
