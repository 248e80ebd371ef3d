"""The TorchTitan recipe on simulated cores: client-side shims, offline assets, the torchrun command."""
