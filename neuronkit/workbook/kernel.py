"""The Jupyter kernel the notebooks run on: `neuronkit`, this environment's Python.

papermill and nbval start the kernel a notebook names; a kernel that resolves to another interpreter
would import another torch (papermill#625), so the runner installs this one into `sys.prefix` when it is
missing, exactly as `python -m ipykernel install --sys-prefix --name neuronkit` does.
"""

from __future__ import annotations

import sys

KERNEL_NAME = "neuronkit"
DISPLAY_NAME = "Python (neuronkit)"


def ensure_kernel(name: str = KERNEL_NAME) -> str | None:
    """Install kernel `name` for this interpreter unless Jupyter already knows it; return the new
    kernelspec's directory, or None when it was already there."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
        return None
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    return install(kernel_name=name, display_name=DISPLAY_NAME, prefix=sys.prefix)
