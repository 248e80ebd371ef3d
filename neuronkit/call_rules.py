"""Input-aware policy rules: whether one call of an op uses a feature the device treats differently.

`data/op_support.toml` names these rules (`call_rule = "..."`) on the gaps that depend on a call's
arguments rather than on the op alone: `sparse_flag`, `mha_mask`, `mha_need_weights`, `channels_last`.
They are defined once, in the native runtime (`device/simulator/csrc/call_rules.cpp`, which cites the
source of each): the device's per-op kernel tests them in C++ on every call, and the op audit and the
kernel's Python path (which builds the error) ask the same predicates here, so they cannot disagree.
"""

from __future__ import annotations

from typing import Any

from neuronkit.device.simulator import native

RULES: frozenset[str] = frozenset(native.call_rule_names())


def fires(rule: str, qualified: str, call: dict[str, Any]) -> bool:
    """Whether `rule` flags a call of overload `qualified` (`aten::clone`, `aten::embedding_bag.padding_idx`)
    whose arguments are `call`, by schema name (a missing argument takes the schema's default)."""
    return native.call_rule(rule, qualified, call)


def qualified_name(op: Any) -> str:
    """An OpOverload's name as the dispatcher and the device's fallback print it: `aten::add.Tensor`,
    `aten::clone` for a default overload."""
    name, overload = op._schema.name, op._overloadname
    return name if overload == "default" else f"{name}.{overload}"


def bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict[str, Any]:
    """A call's arguments by schema argument name (positional first, then keywords)."""
    call = dict(zip(names, args))
    call.update(kwargs)
    return call
