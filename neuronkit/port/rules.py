"""The porting rules: what each CUDA-specific use takes on TorchNeuron, read from
`neuronkit/data/cuda_port_rules.toml` (one table per rule; the matchers in `matchers.py` apply them)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from neuronkit.resources import data_dir

CATEGORIES: tuple[str, ...] = ("rewrite", "decide", "blocker")
FIXES: frozenset[str] = frozenset({"rename", "rename_attr", "to_neuron", "autocast", "string"})


@dataclass(frozen=True)
class Rule:
    """One row of the table: how to recognise a use, its category, the remedy and where the remedy comes from."""

    id: str
    category: str
    remedy: str
    source: str
    names: tuple[str, ...] = ()
    prefix: str | None = None
    method: str | None = None
    attribute: bool = False
    string_values: tuple[str, ...] = ()
    value_regex: str | None = None
    fstring_prefix: str | None = None
    keyword: str | None = None
    call: str | None = None
    keyword_values: tuple[Any, ...] = ()
    fix: str | None = None
    target: str | None = None
    replacement: str | None = None
    accelerator: str | None = None
    source_line: str | None = None
    s_lacks: bool = False

    def matches_string(self, value: str) -> bool:
        """Whether a string literal's value is one this rule is about."""
        if self.value_regex:
            return re.fullmatch(self.value_regex, value) is not None
        return value in self.string_values


def _rule(table: dict[str, Any]) -> Rule:
    table = dict(table)
    names = tuple(table.pop("names", ())) + ((table.pop("name"),) if "name" in table else ())
    is_string = table.pop("string", False)
    values = tuple(table.pop("values", ()))
    rule = Rule(
        id=table.pop("id"), category=table.pop("category"), remedy=table.pop("remedy"), source=table.pop("source"),
        names=names, prefix=table.pop("prefix", None), method=table.pop("method", None),
        attribute=table.pop("attribute", False),
        string_values=values if is_string else (), value_regex=table.pop("value_regex", None),
        fstring_prefix=table.pop("fstring_prefix", None), keyword=table.pop("keyword", None),
        call=table.pop("call", None), keyword_values=() if is_string else values, fix=table.pop("fix", None),
        target=table.pop("target", None), replacement=table.pop("replacement", None),
        accelerator=table.pop("accelerator", None), source_line=table.pop("source_line", None),
        s_lacks=table.pop("s_lacks", False),
    )
    if table:
        raise ValueError(f"rule {rule.id}: unknown keys {sorted(table)}")
    if rule.category not in CATEGORIES:
        raise ValueError(f"rule {rule.id}: category {rule.category!r} is not one of {CATEGORIES}")
    if (rule.fix is not None) != (rule.category == "rewrite") or (rule.fix and rule.fix not in FIXES):
        raise ValueError(f"rule {rule.id}: a rewrite rule needs a fix from {sorted(FIXES)}, other rules none")
    return rule


@lru_cache(maxsize=1)
def load_rules() -> tuple[Rule, ...]:
    """Every rule in the table, in its order."""
    with open(data_dir() / "cuda_port_rules.toml", "rb") as fh:
        return tuple(_rule(table) for table in tomllib.load(fh)["rule"])


def rule_by_id(rule_id: str) -> Rule:
    """The rule with this id (KeyError when there is none)."""
    for rule in load_rules():
        if rule.id == rule_id:
            return rule
    raise KeyError(rule_id)


def rule_for_name(qualified: str) -> Rule | None:
    """The rule for a fully qualified name: an exact `name` first, then the longest `prefix` it falls under."""
    rules = load_rules()
    for rule in rules:
        if qualified in rule.names:
            return rule
    best: Rule | None = None
    for rule in rules:
        if rule.prefix and (qualified == rule.prefix or qualified.startswith(rule.prefix + ".")):
            if best is None or len(rule.prefix) > len(best.prefix or ""):
                best = rule
    return best
