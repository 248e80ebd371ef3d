"""Train a Hugging Face causal LM with Lightning on NeuronCores: one process per core, launched by torchrun.

neuronkit's example of a Lightning script for Trainium (notebook 07 runs it on simulated cores). Nothing in it
is neuronkit's: `Trainer(accelerator="neuron", precision="bf16-mixed")` is Lightning's own API, and Lightning
finds the `neuron` accelerator when neuronkit is installed. Under torchrun, `devices="auto"` is one core per
process and the strategy is Lightning's DDP; each rank trains on its share of one batch of random tokens.

    torchrun --standalone --nproc-per-node 2 train_lightning.py --model PATH [--steps 2] [--batch-size 4]
"""

import argparse

import lightning.pytorch as pl
import torch
from transformers import AutoModelForCausalLM


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a Hugging Face causal LM checkpoint directory")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4, help="sequences per step, over all ranks")
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    return parser.parse_args()


class CausalLM(pl.LightningModule):
    """A causal LM trained on its own tokens; it notes each step's loss and the dtype its logits came in."""

    def __init__(self, path, lr):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(path)
        self.lr = lr
        self.losses, self.logits_dtype = [], None

    def training_step(self, batch, index):
        (ids,) = batch
        output = self.model(input_ids=ids, labels=ids)
        self.logits_dtype = output.logits.dtype
        mean = self.all_gather(output.loss.detach()).mean()  # over the ranks
        self.losses.append(mean.item())
        return output.loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = CausalLM(args.model, args.lr)
    trainer = pl.Trainer(accelerator="neuron", devices="auto", strategy="ddp", precision="bf16-mixed",
                         max_steps=args.steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    seed = torch.Generator().manual_seed(1)  # one batch, again each step: the loss falls as the model fits it
    batch = torch.randint(model.model.config.vocab_size, (args.batch_size, args.seq_len), generator=seed)
    tokens = batch.repeat(args.steps, 1)
    per_rank = max(1, args.batch_size // trainer.world_size)  # Lightning's sampler gives each rank its share
    trainer.fit(model, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=per_rank))
    print(f"rank {trainer.global_rank} on {trainer.strategy.root_device}: {type(trainer.strategy).__name__}, "
          f"{trainer.precision} (logits in {model.logits_dtype})", flush=True)
    if trainer.global_rank == 0:
        for step, loss in enumerate(model.losses, 1):
            print(f"step {step}: loss {loss:.4f} (mean over {trainer.world_size} ranks)", flush=True)


if __name__ == "__main__":
    main()
