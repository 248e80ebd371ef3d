"""The `neuron` process group: torch.distributed's backend for the simulated device (`backend`), the real
backend's limits on collectives (`rules`), what creating the first group does to the runtime
(`runtime_setup`) and the collectives' profiler ranges (`trace`). Registered by the simulator
(`neuronkit.device.simulator.registration`); it never imports the planner or the notebooks' harness."""
