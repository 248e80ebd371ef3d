"""Run by torchrun with two processes (tests/clients/test_lightning.py): Lightning's Trainer with
`accelerator="neuron", devices=2, strategy="ddp"`, the script as a team writes it (nothing from neuronkit). Each
rank writes what it saw to OUT/rank<N>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

from lightning_module import Regression, dataset  # beside this script: its folder is sys.path[0]

out = Path(sys.argv[1])
model = Regression()
trainer = pl.Trainer(accelerator="neuron", devices=2, strategy="ddp", max_epochs=1, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(model, torch.utils.data.DataLoader(dataset(), batch_size=4))
(out / f"rank{trainer.global_rank}.json").write_text(json.dumps({
    "device": str(trainer.strategy.root_device), "strategy": type(trainer.strategy).__name__,
    "backend": torch.distributed.get_backend(), "seen": sorted(model.devices),
    "weights": {name: p.detach().cpu().tolist() for name, p in model.named_parameters()}}))
