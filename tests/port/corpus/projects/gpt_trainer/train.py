"""
A single-file GPT trainer in the style of the small public GPT training repositories: configuration as
module globals overridden from the command line (--key=value), a tiny decoder-only transformer, synthetic
token data, and torch.compile, bf16/fp16 autocast and DDP when CUDA is there.

    python train.py --device=cpu --compile=False
    torchrun --standalone --nproc_per_node=2 train.py

Port corpus (tests/port/test_port_corpus.py): `# must:` marks a line a person must change for Trainium,
`# may:` one where a finding is right but nothing has to change, each with the rule that should report it.
"""
import ast
import math
import os
import sys
import time
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.distributed import init_process_group, destroy_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

# -----------------------------------------------------------------------------
# default config values
out_dir = "out"
log_interval = 1
max_iters = 20
batch_size = 8
block_size = 16
vocab_size = 64
n_layer = 2
n_head = 2
n_embd = 32
dropout = 0.0
learning_rate = 1e-3
weight_decay = 1e-1
beta1, beta2 = 0.9, 0.95
grad_clip = 1.0
seed = 1337
device = "cuda"  # must: device-string
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"  # must: is-available is-bf16-supported
compile = True
# -----------------------------------------------------------------------------
# poor man's configurator: --key=value overrides the globals above
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    assert key in globals(), f"unknown config key {key}"
    try:
        globals()[key] = ast.literal_eval(val)
    except (SyntaxError, ValueError):
        globals()[key] = val
# -----------------------------------------------------------------------------

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="nccl")  # must: nccl-backend
    ddp_rank = int(os.environ["RANK"])
    ddp_local_rank = int(os.environ["LOCAL_RANK"])
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    device = f"cuda:{ddp_local_rank}"  # must: device-string
    torch.cuda.set_device(device)  # must: set-device
    master_process = ddp_rank == 0
else:
    ddp_rank, ddp_world_size, master_process = 0, 1, True
torch.manual_seed(seed)
torch.backends.cuda.matmul.allow_tf32 = True  # may: cuda-backend-flags
torch.backends.cudnn.allow_tf32 = True  # may: cudnn
device_type = "cuda" if "cuda" in device else "cpu"  # must: device-choice
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# synthetic data: a fixed stream of tokens; each process takes its share of every global batch
data = torch.randint(vocab_size, (4096,), generator=torch.Generator().manual_seed(0))


def get_batch(it):
    g = torch.Generator().manual_seed(1000 + it)
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=g)[ddp_rank::ddp_world_size]
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    if device_type == "cuda":  # may: device-guard
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)  # may: pin-memory-method non-blocking
    else:
        x, y = x.to(device), y.to(device)
    return x, y


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)) if targets is not None else None
        return logits, loss


model = GPT()
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))  # must: grad-scaler
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
use_fused = device_type == "cuda"  # may: cuda-check
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=learning_rate, betas=(beta1, beta2), fused=use_fused)
if compile:
    print("compiling the model... (takes a ~minute)")
    model = torch.compile(model)  # must: compile-backend
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank])

t0 = time.time()
for iter_num in range(max_iters):
    lr = learning_rate * 0.5 * (1 + math.cos(math.pi * iter_num / max_iters))
    for group in optimizer.param_groups:
        group["lr"] = lr
    X, Y = get_batch(iter_num)
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if iter_num % log_interval == 0 and master_process:
        dt, t0 = time.time() - t0, time.time()
        print(f"iter {iter_num}: loss {loss.item():.4f}, time {dt * 1000:.2f}ms")

if ddp:
    destroy_process_group()
