"""Fine-tune a small causal LM with a plain PyTorch loop, written for NVIDIA GPUs.

neuronkit's example of a team's training script as it is on migration day: every CUDA habit
`neuronkit port` knows about is here (device strings, `.cuda()`, `torch.cuda.*` calls, cuDNN flags,
pinned memory, autocast, a GradScaler, NCCL). On a machine without a GPU it trains on the CPU.

    python train_cuda.py --model PATH [--steps 20] [--batch-size 4] [--seq-len 32]
    torchrun --nproc-per-node 2 train_cuda.py --model PATH      # data parallel, one GPU per process
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from transformers import AutoModelForCausalLM


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a Hugging Face causal LM checkpoint directory")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast on the GPU")
    return parser.parse_args()


def main():
    args = parse_args()
    distributed = "LOCAL_RANK" in os.environ
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if distributed:
        torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    if device.type == "cuda":
        model = model.cuda()
    model.train()
    if distributed:
        model = DistributedDataParallel(model, device_ids=[local_rank])

    vocab = model.config.vocab_size if not distributed else model.module.config.vocab_size
    tokens = torch.randint(0, vocab, (args.steps * args.batch_size, args.seq_len))
    loader = DataLoader(TensorDataset(tokens), batch_size=args.batch_size, shuffle=True, pin_memory=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.cuda.amp.GradScaler(enabled=False)  # bf16 autocast needs no loss scaling

    start = time.perf_counter()
    for step, (batch,) in enumerate(loader):
        batch = batch.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16 and device.type == "cuda"):
            loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**20
        print(f"peak memory {peak:.1f} MiB", flush=True)
        torch.cuda.empty_cache()
    print(f"{args.steps} steps in {time.perf_counter() - start:.2f} s", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
