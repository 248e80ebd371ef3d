"""Mixed-precision (float16) training with loss scaling, as the AMP recipes write it for GPUs.

    python train.py --steps 20

Port corpus: `# must:` lines a person must change for Trainium, `# may:` lines with a right but optional finding.
"""
import argparse

import torch
import torch.nn as nn


def make_model(width):
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"  # must: device-choice
    torch.manual_seed(0)
    model = make_model(args.width).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.cuda.amp.GradScaler()  # must: grad-scaler
    for step in range(args.steps):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(args.batch_size, args.width, generator=g).to(device)
        y = x.mean(dim=1, keepdim=True)
        with torch.cuda.amp.autocast(dtype=torch.float16):  # must: cuda-amp-autocast
            loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.5f} scale {scaler.get_scale()}", flush=True)


if __name__ == "__main__":
    main()
