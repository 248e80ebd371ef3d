"""A small training package: device set-up, model and the training engine (port corpus: CUDA lives here,
not in the script)."""
from trainer.engine import Engine
from trainer.utils import setup_device

__all__ = ["Engine", "setup_device"]
