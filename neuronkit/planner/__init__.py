"""The parallel planner: will a training layout fit each NeuronCore, and what will it send, before renting
(`plan`, `sweep`; `neuronkit plan MODEL`). Arithmetic on layer figures `probe` measures with PyTorch's fake
process group, and the instances of `neuronkit/data/trainium_hardware.toml`; it runs no device."""
