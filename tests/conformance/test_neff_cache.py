"""The eager NEFF cache as the source keeps it (fidelity audit row 8). Source: S = parmoham-aws/test-repo-parmoham."""

from __future__ import annotations

import random

import pytest
import torch

N = "neuron"


def _new_entries(action) -> int:
    before = torch.neuron.neff_cache_stats()["entries"]
    action()
    return torch.neuron.neff_cache_stats()["entries"] - before


def test_int_and_float_scalars_are_inputs_not_part_of_the_key():
    """Fidelity audit row 8 (S lowers Python scalars as 0-d inputs): x+1, x+2, x+3 share one NEFF."""
    x = torch.randn(7, 3, device=N)
    assert _new_entries(lambda: [x + 1, x + 2, x + 3]) == 1
    assert _new_entries(lambda: [x * 1.5, x * 2.5]) == 1


def test_scalar_arguments_are_inputs_not_part_of_the_key():
    """Fidelity audit row 8 for Scalar-typed arguments (`value`): an optimizer's
    `addcdiv_(..., value=-step_size)` reuses one NEFF as the step size changes. S: `add.Scalar` is not
    registered (op_verdicts-torch<release>.json: its CompositeExplicitAutograd kernel calls add.Tensor with the number
    wrapped), so it shares `x + n`'s NEFF."""
    x, y = torch.randn(4, 3, device=N), torch.rand(4, 3, device=N) + 1
    assert _new_entries(lambda: [x.addcdiv(x, y, value=0.5), x.addcdiv(x, y, value=-0.25)]) == 1
    # `add`'s alpha is static under the torch-mlir kernel that wins on torch 2.13 (test_registrations.py)
    _new_entries(lambda: x + 7)
    assert _new_entries(lambda: [torch.ops.aten.add.Scalar(x, 2), torch.ops.aten.add.Scalar(x, 5)]) == 0


def test_static_int_arguments_stay_in_the_key():
    """S: dims are static arguments of the lowering (static_argnums/static_argnames in python_ops kernels)."""
    x = torch.randn(5, 6, device=N)
    assert _new_entries(lambda: [x.sum(0), x.sum(1)]) == 2


def test_empty_tensors_compile_nothing():
    """Fidelity audit row 8: empty tensors skip compilation."""
    empty = torch.empty(0, 4, device=N)
    assert _new_entries(lambda: [empty + 1, empty * 2]) == 0


@pytest.mark.parametrize("variable, value, disabled", [
    ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "1", True),
    ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "true", False),  # C++: exactly "1" (PersistentCacheBackend.cpp:18)
    ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "yes", True),  # Python: 1/true/yes (utils.py:191-198)
    ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "TRUE", True),
])
def test_both_disable_variables_and_their_spellings(forked_python, variable, value, disabled):
    """S: csrc/core/cache/PersistentCacheBackend.cpp:18,55-59 and torch_neuronx/utils.py:191-198. The cache reads
    them when the device is installed: a fork that installs it (conftest's forked_python) sees them as a new process."""
    proc = forked_python("""
        import torch
        print(torch.neuron.neff_cache_stats()["directory"])
    """, env={variable: value})
    assert (proc.stdout.strip() == "None") == disabled


test_both_disable_variables_and_their_spellings = pytest.mark.subprocess(
    test_both_disable_variables_and_their_spellings)


def test_entry_limit_evicts_least_recently_used(forked_python):
    """S: csrc/core/compilation/CompilationCache.cpp:27-38 (NEURON_COMPILATION_CACHE_MAX_ENTRIES, LRU)."""
    proc = forked_python("""
        import torch
        for n in range(1, 6):
            torch.ones(n, device="neuron") * 2
        stats = torch.neuron.neff_cache_stats()
        print(stats["entries"], stats["evictions"] > 0)
    """, env={"NEURON_COMPILATION_CACHE_MAX_ENTRIES": "3"})
    assert proc.stdout.split() == ["3", "True"]


test_entry_limit_evicts_least_recently_used = pytest.mark.subprocess(test_entry_limit_evicts_least_recently_used)


@pytest.mark.parametrize("name, run", [
    ("aten::fill_.Scalar", lambda x, v: x.clone().fill_(v)),
    ("aten::threshold", lambda x, v: torch.nn.functional.threshold(x, v, 0.0)),
    ("aten::softplus", lambda x, v: torch.nn.functional.softplus(x, beta=v)),
    ("aten::addmm", lambda x, v: torch.addmm(x, x, x, beta=v)),
])
def test_static_scalar_arguments_are_part_of_the_key(name, run):
    """S: torch-mlir registrations name static arguments, keyed by value (kernels/base.py:131-136;
    torch_mlir/ops/creation.py:50 fill_.Scalar, misc.py:135 threshold, activation.py:34 softplus,
    linear_algebra.py:28 addmm beta/alpha; data/op_verdicts-torch<release>.json `static`): each new value is a new NEFF,
    the same value again is a cache hit."""
    from neuronkit.policy import load_policy
    assert load_policy().static_scalars(name)
    x = torch.randn(3, 3, device=N)
    run(x, 0.25)  # the call's other NEFFs (clone) and this value
    fresh = 0.5 + random.random()  # a value no earlier run keyed
    assert _new_entries(lambda: run(x, fresh)) == 1
    assert _new_entries(lambda: [run(x, fresh), run(x, 0.25)]) == 0
