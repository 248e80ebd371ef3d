"""The matchers: one libcst pass over a module that finds every use a rule in `rules.py` is about and, for
`rewrite` rules spelled so a mechanical edit is safe, builds the rewritten node (libcst keeps everything
else byte for byte, so the diff shows only the fixed expressions)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import (
    ParentNodeProvider,
    PositionProvider,
    QualifiedName,
    QualifiedNameProvider,
    QualifiedNameSource,
)

from neuronkit.port.rules import Rule, load_rules, rule_for_name


@dataclass(frozen=True)
class Finding:
    """One CUDA-specific use: where, what (the source text), the rule, and whether `--write` fixes it."""

    path: str
    line: int
    col: int  # 1-based
    code: str
    rule: Rule
    detail: str  # the qualified name, method or literal matched
    fixed: bool  # the rewrite is applied by --write / --diff

    @property
    def category(self) -> str:
        return self.rule.category


def _dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


class PortMatcher(cst.CSTTransformer):
    """Collects `findings` for one module while transforming it; the result is the rewritten module."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ParentNodeProvider)

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.findings: list[Finding] = []
        self._import_depth = 0
        self._rules = load_rules()
        self._methods = {r.method: r for r in self._rules if r.method}
        self._strings = [r for r in self._rules if r.string_values or r.value_regex]
        self._keywords = [r for r in self._rules if r.keyword]
        self._fixed_imports: set[str] = set()  # names imported from torch.neuron by a fixed import line

    # --- bookkeeping -------------------------------------------------------------------------------------
    def _add(self, node: cst.CSTNode, rule: Rule, detail: str, fixed: bool) -> None:
        start = self.get_metadata(PositionProvider, node).start
        code = self.module.code_for_node(node)
        self.findings.append(Finding(self.path, start.line, start.column + 1, " ".join(code.split())[:80],
                                     rule, detail, fixed and rule.category == "rewrite"))

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node

    def _imported_names(self, node: cst.CSTNode) -> list[str]:
        names: set[QualifiedName] = self.get_metadata(QualifiedNameProvider, node, set())
        return sorted(q.name for q in names if q.source is QualifiedNameSource.IMPORT)

    # --- imports -----------------------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        self._import_depth += 1
        for alias in node.names:
            name = _dotted(alias.name) or ""
            if (rule := rule_for_name(name)) and rule.prefix and rule.category == "blocker":
                self._add(alias, rule, name, False)

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        self._import_depth -= 1
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import_depth += 1

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.BaseSmallStatement:
        self._import_depth -= 1
        module = _dotted(original.module) if original.module and not original.relative else None
        if module is None or isinstance(original.names, cst.ImportStar):
            if module and (rule := rule_for_name(module)):
                self._add(original, rule, module, False)
            return updated
        hits = [(alias, f"{module}.{_dotted(alias.name)}") for alias in original.names]
        hits = [(alias, name, rule) for alias, name in hits if (rule := rule_for_name(name))]
        # `from torch.cuda import synchronize, empty_cache`: the same names exist in torch.neuron
        same_name = module == "torch.cuda" and len(hits) == len(original.names) and all(
            rule.fix == "rename" and rule.target == "torch.neuron." + name.rsplit(".", 1)[1] for _, name, rule in hits)
        for alias, name, rule in hits:
            self._add(alias, rule, name, same_name)
        if same_name:
            self._fixed_imports.update((alias.asname.name.value if alias.asname else _dotted(alias.name))
                                       for alias, _, _ in hits)
            return updated.with_changes(module=_expr("torch.neuron"))
        return updated

    # --- names and attributes ----------------------------------------------------------------------------
    def _outermost(self, node: cst.CSTNode) -> bool:
        parent = self.get_metadata(ParentNodeProvider, node, None)
        return not (isinstance(parent, cst.Attribute) and parent.value is node)

    def _has_rule(self, node: cst.CSTNode) -> bool:
        return any(rule_for_name(name) for name in self._imported_names(node))

    def _reference(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        # `f(x).attr` resolves to f's name plus `.attr` in libcst; only a plain dotted chain names a thing
        if self._import_depth or not self._outermost(original) or _dotted(original) is None:
            return updated
        for name in self._imported_names(original):
            rule = rule_for_name(name)
            if rule is None:
                continue
            spelled = _dotted(original) == name
            if rule.fix == "rename" and not spelled:
                if _dotted(original) in self._fixed_imports:
                    return updated  # its import line was rewritten to torch.neuron
            if rule.fix == "autocast":
                self._add(original, rule, name, False)  # fixed at the call, see leave_Call
                return updated
            fixed = spelled and rule.fix == "rename"
            self._add(original, rule, name, fixed)
            return _expr(rule.target) if fixed and rule.target else updated
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        parent = self.get_metadata(ParentNodeProvider, original, None)
        if isinstance(parent, cst.Attribute) and parent.attr is original:
            return updated  # the attribute part of a chain: the chain is matched as a whole
        return self._reference(original, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        rule = self._methods.get(original.attr.value)
        if rule and rule.attribute and not self._has_rule(original) and not self._import_depth:
            self._add(original, rule, "." + original.attr.value, True)
            return updated.with_changes(attr=cst.Name(rule.target))
        return self._reference(original, updated)

    # --- calls: methods, autocast, keywords --------------------------------------------------------------
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        updated = self._keywords_of(original, updated)
        func = original.func
        if isinstance(func, cst.Attribute) and not self._has_rule(func):
            rule = self._methods.get(func.attr.value)
            if rule and not rule.attribute:
                self._add(original, rule, f".{func.attr.value}()", True)
                return self._to_neuron(updated) if rule.fix == "to_neuron" else updated
        for name in self._imported_names(func):
            rule = rule_for_name(name)
            if rule and rule.fix == "autocast" and _dotted(func) == name:
                self._mark_fixed(func)
                return updated.with_changes(func=_expr(rule.target),
                                            args=[cst.Arg(cst.SimpleString('"neuron"')), *updated.args])
        return updated

    def _mark_fixed(self, node: cst.CSTNode) -> None:
        start = self.get_metadata(PositionProvider, node).start
        for i, f in enumerate(self.findings):
            if (f.line, f.col) == (start.line, start.column + 1) and f.rule.fix == "autocast":
                self.findings[i] = Finding(f.path, f.line, f.col, f.code, f.rule, f.detail, True)

    @staticmethod
    def _to_neuron(call: cst.Call) -> cst.Call:
        """`x.cuda()` -> `x.to("neuron")`; `x.cuda(i)` -> `x.to(torch.device("neuron", i))`; keywords kept."""
        assert isinstance(call.func, cst.Attribute)
        positional = [a for a in call.args if a.keyword is None]
        rest = [a for a in call.args if a.keyword is not None and a.keyword.value != "device"]
        device = positional[0].value if positional else next(
            (a.value for a in call.args if a.keyword and a.keyword.value == "device"), None)
        if device is None:
            target: cst.BaseExpression = cst.SimpleString('"neuron"')
        elif isinstance(device, cst.Integer):
            target = cst.SimpleString(f'"neuron:{device.value}"')
        else:
            target = cst.Call(func=_expr("torch.device"),
                              args=[cst.Arg(cst.SimpleString('"neuron"')), cst.Arg(device)])
        args = [cst.Arg(target), *rest]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=args)

    def _keywords_of(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        callee = set(self._imported_names(original.func))
        for arg in original.args:
            if arg.keyword is None:
                continue
            for rule in self._keywords:
                if rule.keyword != arg.keyword.value or (rule.call and rule.call not in callee):
                    continue
                value = _literal(arg.value)
                if value is not _NO_LITERAL and value in rule.keyword_values:
                    self._add(arg, rule, f"{rule.keyword}={value!r}", False)
        return updated

    # --- string literals ---------------------------------------------------------------------------------
    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.BaseExpression:
        if self._import_depth or "b" in original.prefix.lower():
            return updated
        value = original.evaluated_value
        if not isinstance(value, str):
            return updated
        for rule in self._strings:
            if rule.matches_string(value):
                self._add(original, rule, repr(value), True)
                new = rule.replacement if rule.replacement is not None else re.sub(r"^cuda", "neuron", value)
                quote = original.quote
                return updated.with_changes(value=f"{original.prefix}{quote}{new}{quote}")
        return updated

    def leave_FormattedString(self, original: cst.FormattedString,
                              updated: cst.FormattedString) -> cst.BaseExpression:
        first = original.parts[0] if original.parts else None
        for rule in self._strings:
            if rule.fstring_prefix and isinstance(first, cst.FormattedStringText) and \
                    first.value.startswith(rule.fstring_prefix) and len(original.parts) > 1:
                self._add(original, rule, self.module.code_for_node(original), True)
                text = updated.parts[0]
                assert isinstance(text, cst.FormattedStringText)
                new_first = text.with_changes(value="neuron" + text.value[len("cuda"):])
                return updated.with_changes(parts=[new_first, *updated.parts[1:]])
        return updated


_NO_LITERAL = object()


def _literal(node: cst.BaseExpression) -> object:
    """The value of a string / True / False / None literal, else a sentinel."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    return _NO_LITERAL
