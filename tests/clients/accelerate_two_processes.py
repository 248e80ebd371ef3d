"""Run by `accelerate launch --num_processes 2` (tests/clients/test_accelerate_launch.py): two ranks train the
bundled tiny Qwen3 with DDP on halves of one batch, save the state, and load it back. Each rank writes what it
saw to OUT/rank<N>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from neuronkit.models import load_model

out = Path(sys.argv[1])
accelerator = Accelerator(mixed_precision="no")
rank = accelerator.process_index
batch = torch.randint(100, (4, 16), generator=torch.Generator().manual_seed(0))
torch.manual_seed(0)
model = load_model("tiny-qwen3").train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
ids = batch.chunk(accelerator.num_processes)[rank].to(accelerator.device)
losses = []
for _ in range(2):
    loss = model(input_ids=ids, labels=ids).loss
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    losses.append(accelerator.reduce(loss.detach(), reduction="mean").item())
weights = {name: p.detach().cpu() for name, p in accelerator.unwrap_model(model).named_parameters()}
accelerator.save_state(out / "state")
accelerator.wait_for_everyone()  # the main process writes the state; the other waits for it
try:
    accelerator.load_state(out / "state")
    load_error = ""
except Exception as exc:  # the finding: safetensors refuses the `neuron` device string
    load_error = f"{type(exc).__name__}: {exc}"
accelerator.load_state(out / "state", map_location="cpu")  # the remedy
reloaded = max((p.detach().cpu() - weights[n]).abs().max().item()
               for n, p in accelerator.unwrap_model(model).named_parameters())
if accelerator.is_main_process:
    torch.save(weights, out / "weights.pt")
(out / f"rank{rank}.json").write_text(json.dumps({
    "device": str(accelerator.device), "distributed_type": str(accelerator.distributed_type),
    "num_processes": accelerator.num_processes, "losses": losses, "load_error": load_error,
    "reload_diff": reloaded}))
