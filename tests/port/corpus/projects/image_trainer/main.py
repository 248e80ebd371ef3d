"""Train a small CNN classifier, in the style of the classic image-classification example scripts: argparse,
a device picked once, DataParallel when the machine has several GPUs, a step LR schedule and a checkpoint.

    python main.py --epochs 1 --batch-size 16

The data is a synthetic image set (fixed seed), so the script needs no download.
Port corpus: `# must:` lines a person must change for Trainium, `# may:` lines with a right but optional finding.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(16 * 5 * 5, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(n, 1, 14, 14, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(images, labels)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}")


def main():
    parser = argparse.ArgumentParser(description="small CNN example")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=1)
    parser.add_argument("--save-model", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # must: device-choice
    if device.type == "cuda":  # may: device-guard
        torch.backends.cudnn.benchmark = True  # may: cudnn

    loader_kwargs = {"batch_size": args.batch_size, "shuffle": False}
    loader_kwargs["pin_memory"] = device.type == "cuda"  # may: cuda-check
    train_loader = DataLoader(synthetic_images(256, args.seed), **loader_kwargs)

    model = Net().to(device)
    if torch.cuda.device_count() > 1:  # must: device-count
        print(f"Let's use {torch.cuda.device_count()} GPUs!")  # may: device-count
        model = nn.DataParallel(model)  # must: data-parallel
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        scheduler.step()
    if args.save_model:
        torch.save(model.state_dict(), "cnn.pt")


if __name__ == "__main__":
    main()
