"""The notebooks' distributed harness: launch the built-in scenarios (DDP, FSDP2, tensor, sequence and
pipeline parallel) with torchrun on simulated cores (`launch`, `scenarios`) and keep notebook 07's
scale-out record (`record`). The process group they run on is `neuronkit.device.process_group`; the
layout planner is `neuronkit.planner`."""
