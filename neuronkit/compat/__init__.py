"""The public compatibility table's vocabulary (`neuronkit compat`, `neuronkit audit --compat`).

AWS publishes TorchNeuron's support per public PyTorch API (Y Native / Host-only / Needs a process group;
CPU_FALLBACK with the ATen op and dtypes; N). `vocabulary` holds those words and the rule that classifies an
API from the ATen ops it runs; `table` generates the simulator's whole table from the op-support policy;
the op audit lists a model's own calls in the same words (`neuronkit.op_audit.compat`).
"""
