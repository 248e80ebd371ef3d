"""`torchrun ... -m neuronkit.titan.train --module llama3 --config llama3_debugmodel ...`: TorchTitan's own
`torchtitan.train` entry point with the client-side shims (`neuronkit.titan.shims`) applied first."""

from __future__ import annotations

from neuronkit.titan import shims

if __name__ == "__main__":
    shims.apply()
    from torchtitan.train import main
    main()
