"""Train a Hugging Face causal LM with FSDP2 across NeuronCores: one process per core, launched by torchrun.

neuronkit's example of a training script written for Trainium (notebook 07 runs it on simulated cores).
The process group, the device mesh and FSDP2 are PyTorch's own; the device is `neuron`. Each rank holds
a shard of every parameter, gathers a layer's weights only while it computes with them, and trains on
its share of one global batch of random tokens.

    torchrun --standalone --nproc-per-node 2 train_fsdp2.py --model PATH [--steps 2] [--batch-size 4]
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a Hugging Face causal LM checkpoint directory")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4, help="sequences per step, over all ranks")
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    return parser.parse_args()


def main():
    args = parse_args()
    dist.init_process_group()  # from torchrun's environment: the neuron process group, rank i on neuron:i
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", torch.neuron.current_device())
    mesh = init_device_mesh("neuron", (world,))  # one dimension: every layer sharded over every rank

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model)  # on the host; fully_shard moves the shards
    full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    layers = set(model._no_split_modules or ())  # the decoder layer class(es), each sharded on its own
    for module in model.modules():
        if type(module).__name__ in layers:
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    shard_bytes = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
    print(f"rank {rank} on {device}: {shard_bytes:,} of {full_bytes:,} parameter bytes", flush=True)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    seed = torch.Generator().manual_seed(1)  # the same batch on every rank; each trains on its share
    batch = torch.randint(model.config.vocab_size, (args.batch_size, args.seq_len), generator=seed)
    mine = batch.chunk(world)[rank].to(device)
    model.train()
    for step in range(1, args.steps + 1):  # one batch, again and again: the loss falls as the model fits it
        loss = model(input_ids=mine, labels=mine).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # the sum over ranks
        if rank == 0:
            print(f"step {step}: loss {mean.item() / world:.4f} (mean over {world} ranks)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
