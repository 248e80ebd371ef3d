"""The porting rules: what each CUDA-specific or PyTorch/XLA-specific use takes on TorchNeuron, read from
`neuronkit/data/cuda_port_rules.toml` and `neuronkit/data/xla_port_rules.toml` (one table per rule; the
matchers in `matchers.py` apply them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from neuronkit.resources import data_toml

CATEGORIES: tuple[str, ...] = ("rewrite", "decide", "blocker")
# How a rewrite is made (matchers.py): see the header of cuda_port_rules.toml.
FIXES: frozenset[str] = frozenset({
    "rename", "rename_last", "to_device", "autocast", "grad_scaler", "string", "drop_keyword", "add_keyword",
    "guard", "template", "statement", "drop_import"})
RULE_FILES: tuple[str, ...] = ("cuda_port_rules.toml", "xla_port_rules.toml")
# A `source` shown to users is a public page or a section of this project's docs.
PUBLIC_SOURCE = re.compile(r"^(https://\S+|docs/[\w.-]+\.md#[\w-]+)$")


@dataclass(frozen=True)
class Rule:
    """One row of the table: how to recognise a use, its category, the remedy and where the remedy comes
    from (`source`: public pages, `;`-separated; `evidence`: what the rule rests on beyond them, for
    docs/port.md and the tests)."""

    id: str
    category: str
    remedy: str
    source: str
    family: str = "cuda"  # cuda | xla: which table the rule comes from
    evidence: str | None = None
    names: tuple[str, ...] = ()
    prefix: str | None = None
    method: str | None = None
    attribute: bool = False
    string_values: tuple[str, ...] = ()
    value_regex: str | None = None
    fstring_prefix: str | None = None
    keyword: str | None = None
    calls: tuple[str, ...] = ()  # a keyword rule: only in calls to these (any call when empty)
    keyword_values: tuple[Any, ...] = ()
    missing_keyword: str | None = None  # a call to `names` without this keyword (nor its `position`)
    position: int | None = None
    guard: bool = False  # a CUDA query: its value differs on neuron from what the script saw without CUDA
    fix: str | None = None
    target: str | None = None
    replacement: str | None = None
    template: str | None = None  # template fixes: the replacement, whatever the arguments
    templates: tuple[str, ...] = ()  # ... or one per number of positional arguments ("" removes a statement)
    distributed_template: str | None = None  # ... when the project starts several processes
    own_group_template: str | None = None  # ... when the project calls init_process_group itself
    ignore_keywords: tuple[str, ...] = ()  # keywords with no native meaning, dropped by a template fix
    parameters: tuple[str, ...] = ()  # the names of the call's positional parameters (a keyword fills {i})
    helpers: tuple[str, ...] = ()  # native_helpers.py functions a template calls
    writes_only: bool = False  # a string fix applied where the literal is written (a key assigned), not read
    accelerator: str | None = None
    s_line: str | None = None  # S's file:line defining `target` (checked by the tests)
    s_lacks: bool = False
    raises: bool = False  # the call raises without CUDA: reached with no CUDA check on the way, a blocker
    result_attributes: tuple[str, ...] = ()  # the target's result has only these: another read is a decision
    device_argument: str | None = None  # a rename's target takes this parameter as an index or torch.device only

    def matches_string(self, value: str) -> bool:
        """Whether a string literal's value is one this rule is about."""
        if self.value_regex:
            return re.fullmatch(self.value_regex, value) is not None
        return value in self.string_values

    def template_for(self, positional: int, distributed: bool, own_group: bool) -> str | None:
        """The template for a call with `positional` positional arguments in a project that starts several
        processes (`distributed`) or makes its own process group (`own_group`); None: no mechanical form."""
        if own_group and self.own_group_template is not None:
            return self.own_group_template
        if distributed and self.distributed_template is not None:
            return self.distributed_template
        if self.template is not None:
            return self.template
        return self.templates[positional] if positional < len(self.templates) else None


def _rule(table: dict[str, Any], family: str) -> Rule:
    table = dict(table)
    names = tuple(table.pop("names", ())) + ((table.pop("name"),) if "name" in table else ())
    is_string = table.pop("string", False)
    values = tuple(table.pop("values", ()))
    calls = table.pop("call", ())
    simple = ("prefix", "method", "value_regex", "fstring_prefix", "keyword", "missing_keyword",
              "position", "fix", "target", "replacement", "template", "distributed_template", "own_group_template",
              "accelerator", "s_line", "evidence", "device_argument")
    rule = Rule(
        id=table.pop("id"), category=table.pop("category"), remedy=table.pop("remedy"), source=table.pop("source"),
        family=family, names=names, attribute=table.pop("attribute", False),
        calls=(calls,) if isinstance(calls, str) else tuple(calls),
        string_values=values if is_string else (), keyword_values=() if is_string else values,
        guard=table.pop("guard", False), templates=tuple(table.pop("templates", ())),
        ignore_keywords=tuple(table.pop("ignore_keywords", ())), parameters=tuple(table.pop("parameters", ())),
        helpers=tuple(table.pop("helpers", ())), writes_only=table.pop("writes_only", False),
        s_lacks=table.pop("s_lacks", False), raises=table.pop("raises", False),
        result_attributes=tuple(table.pop("result_attributes", ())), **{key: table.pop(key, None) for key in simple},
    )
    if table:
        raise ValueError(f"rule {rule.id}: unknown keys {sorted(table)}")
    if rule.category not in CATEGORIES:
        raise ValueError(f"rule {rule.id}: category {rule.category!r} is not one of {CATEGORIES}")
    if (rule.fix is not None) != (rule.category == "rewrite") or (rule.fix and rule.fix not in FIXES):
        raise ValueError(f"rule {rule.id}: a rewrite rule needs a fix from {sorted(FIXES)}, other rules none")
    bad = [s for s in rule.source.split("; ") if not PUBLIC_SOURCE.match(s)]
    if bad:
        raise ValueError(f"rule {rule.id}: a source must be a public URL or a docs/*.md#section, not {bad[0]!r}")
    return rule


@lru_cache(maxsize=1)
def load_rules() -> tuple[Rule, ...]:
    """Every rule in the tables, in their order (CUDA first)."""
    rules: list[Rule] = []
    for name in RULE_FILES:
        rules.extend(_rule(table, name.split("_")[0]) for table in data_toml(name)["rule"])
    ids = [r.id for r in rules]
    if len(ids) != len(set(ids)):
        raise ValueError(f"duplicate rule ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return tuple(rules)


def rule_by_id(rule_id: str) -> Rule:
    """The rule with this id (KeyError when there is none)."""
    for rule in load_rules():
        if rule.id == rule_id:
            return rule
    raise KeyError(rule_id)


@lru_cache(maxsize=4096)
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
