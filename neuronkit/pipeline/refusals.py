"""Explain a stage's error when the device refused an op's inputs (a precondition, S's `can_handle`):
which op, in which layer of the model, and the remedy from the op-support policy; or when the model is on
an upstream client's path with a known finding (neuronkit/data/client_paths.toml)."""

from __future__ import annotations

from torch import nn

from neuronkit import client_paths
from neuronkit.policy import load_policy
from neuronkit.preconditions import refusal


def failing_module(error: BaseException) -> str | None:
    """The module path (from the outermost module running, the model) of the innermost module whose code
    was running when `error` was raised; None outside any module (e.g. in backward)."""
    modules: list[nn.Module] = []
    tb = error.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and (not modules or modules[-1] is not owner):
            modules.append(owner)
        tb = tb.tb_next
    if len(modules) < 2:
        return None
    paths = {id(m): name for name, m in modules[0].named_modules()}
    return paths.get(id(modules[-1]))


def explain(error: BaseException) -> str | None:
    """`aten::_grouped_mm in model.layers.0.mlp.experts refused its inputs [category]. <remedy>`, or None
    when `error` is not a refusal."""
    found = refusal(error)
    if found is None:
        return _client_path(error)
    op, category = found
    where = failing_module(error)
    policy = load_policy()
    return (f"{op}{f' in {where}' if where else ''} refused its inputs on the device ({policy.features[category]}) "
            f"[{category}]. {policy.remedies[category]}")


def _client_path(error: BaseException) -> str | None:
    """`diffusers path: <finding> in <module> [client:<key>]. <remedy>`, or None."""
    finding = client_paths.explain(error)
    if finding is None:
        return None
    where = failing_module(error)
    return (f"{finding.client} path: {finding.finding}{f' in {where}' if where else ''} ({finding.why}) "
            f"[client:{finding.key}]. {finding.remedy}")
