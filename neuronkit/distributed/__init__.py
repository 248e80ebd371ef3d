"""Distributed training on Trainium: plan a parallel layout's memory and traffic before renting (`plan`),
and run PyTorch's parallel APIs on simulated cores through the `neuron` process group (`backend`,
`launch`, `scenarios`)."""
