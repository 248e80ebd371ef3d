"""Entry script of a small training package: the CUDA is in trainer/, the configuration beside the script.

    python train.py --config configs/small.json --steps 20
    torchrun --nproc-per-node 2 train.py
"""
import argparse
import json
import os

from trainer import Engine, setup_device
from trainer.utils import seed_everything

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=os.path.join(HERE, "configs", "small.json"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with open(args.config) as fh:
        config = json.load(fh)
    seed_everything(0)
    device = setup_device()
    Engine(config, device).fit(args.steps)


if __name__ == "__main__":
    main()
