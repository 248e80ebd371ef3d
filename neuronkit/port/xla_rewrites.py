"""The part of the port pass about PyTorch/XLA: XLA calls replaced by their native expression or statement
(`templates` of xla_port_rules.toml), the native helpers they call collected, `ParallelLoader(...)
.per_device_loader(d)` chains, torch_xla imports dropped once unused, and the DTensor plan of
neuronx-distributed's parallel layers."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from neuronkit.port import edits
from neuronkit.port.cst_util import code, dotted, expr
from neuronkit.port.rules import Rule, rule_by_id, rule_for_name

# neuronx-distributed's parallel layers and the DTensor style each becomes (nxd-parallel-layers' plan note).
TP_STYLES = {"ColumnParallelLinear": "ColwiseParallel()", "RowParallelLinear": "RowwiseParallel()",
             "ParallelEmbedding": "RowwiseParallel(input_layouts=Replicate())"}


class XlaRewrites:
    """Mixed into PortMatcher (which provides `_add`, `_mark_fixed`, `_imported_names`, `facts`, `module`,
    `helpers`, `findings` and the metadata)."""

    def _init_xla(self) -> None:
        self._xla_imports: list[tuple[int, set[str]]] = []  # (finding index, names the import binds)
        self._plans: dict[str, dict[str, str]] = {}  # class -> {attribute: DTensor style} (parallel layers)
        self._plan_findings: list[tuple[int, str]] = []

    def _drop_unused_xla_imports(self, module: cst.Module) -> cst.Module:
        """Each torch_xla import whose names nothing in the rewritten module uses any more is removed."""
        if not self._xla_imports:
            return module
        used = used_outside_imports(module)
        for index, bound in self._xla_imports:
            if bound and not bound & used:
                self._mark_fixed(index)
        return module.visit(_ImportDropper())




    def _plan_entry(self, reference: cst.CSTNode, layer: str, index: int) -> None:
        """`self.fc1 = ColumnParallelLinear(...)` in class C: `"fc1": ColwiseParallel()` in C's DTensor plan."""
        call = self.get_metadata(ParentNodeProvider, reference, None)
        assign = self.get_metadata(ParentNodeProvider, call, None) if isinstance(call, cst.Call) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return
        target = assign.targets[0].target
        node: cst.CSTNode | None = assign
        while node is not None and not isinstance(node, cst.ClassDef):
            node = self.get_metadata(ParentNodeProvider, node, None)
        if isinstance(target, cst.Attribute) and isinstance(node, cst.ClassDef):
            self._plans.setdefault(node.name.value, {})[target.attr.value] = TP_STYLES[layer]
            self._plan_findings.append((index, node.name.value))

    def _note_plans(self) -> None:
        for index, owner in self._plan_findings:
            plan = ", ".join(f'"{attr}": {style}' for attr, style in self._plans[owner].items())
            self.findings[index] = replace(self.findings[index], note=(
                f'the plan for {owner} (nn.Linear / nn.Embedding in place of the parallel layers): parallelize_module('
                f'{owner.lower()}, init_device_mesh("neuron", (tp,)), {{{plan}}})'))


    def _own_statement(self, call: cst.Call) -> bool:
        """Whether the call is a statement line of its own (what a statement fix replaces)."""
        expr = self.get_metadata(ParentNodeProvider, call, None)
        line = self.get_metadata(ParentNodeProvider, expr, None) if isinstance(expr, cst.Expr) else None
        return isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1


    def _template(self, original: cst.Call, updated: cst.Call, rule: Rule, name: str) -> cst.BaseExpression:
        positional = _positional(original, rule)
        template = rule.template_for(positional, self.facts.distributed, self.facts.own_group)
        text = edits.fill(template, updated, self.module, rule.ignore_keywords,
                          parameters=rule.parameters) if template else None
        self._add(original, rule, name, text is not None)  # ParallelLoader: fixed with its per_device_loader
        if text is None:
            return updated
        self.helpers.update(rule.helpers)
        return expr(text)

    def _parallel_loader(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """`pl.ParallelLoader(loader, [device]).per_device_loader(device)` -> `DeviceLoader(loader, device)`."""
        inner = original.func.value  # type: ignore[attr-defined]
        if not isinstance(inner, cst.Call) or not original.args:
            return None
        rule = rule_by_id("parallel-loader")
        if not set(self._imported_names(inner.func)) & set(rule.names):
            return None
        template = rule.template_for(_positional(inner, rule), False, False)
        inner_updated = updated.func.value  # type: ignore[attr-defined]
        device = self.module.code_for_node(updated.args[0].value)
        text = edits.fill(template, inner_updated, self.module, rule.ignore_keywords, {"chained": device},
                          rule.parameters) if template else None
        if text is None:
            return None
        position = self.get_metadata(PositionProvider, inner).start
        for i, f in enumerate(self.findings):
            if f.rule.id == "parallel-loader" and (f.line, f.col) == (position.line, position.column + 1):
                self._mark_fixed(i)
        self.helpers.update(rule.helpers)
        return expr(text)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        """A call whose rule rewrites the whole statement (`xm.mark_step()`, `xm.master_print(...)`)."""
        if len(original.body) != 1 or not isinstance(original.body[0], cst.Expr) or \
                not isinstance(original.body[0].value, cst.Call):
            return updated
        call = original.body[0].value
        for name in self._imported_names(call.func):
            rule = rule_for_name(name)
            if rule is None or rule.fix != "statement":
                continue
            positional = _positional(call, rule)
            template = rule.template_for(positional, self.facts.distributed, self.facts.own_group)
            new_call = updated.body[0].value  # type: ignore[attr-defined]
            if not isinstance(new_call, cst.Call):
                return updated
            text = edits.fill(template, new_call, self.module, rule.ignore_keywords,
                              parameters=rule.parameters) if template is not None else None
            self._add(call, rule, name, text is not None)
            if text is None:
                return updated
            self.helpers.update(rule.helpers)
            comment = f"# {' '.join(code(call).split())[:60]}: not needed on neuron {edits.MARK}"
            return edits.replace_statement(updated, text, comment)
        return updated


class _ImportDropper(cst.CSTTransformer):
    """Removes the torch_xla imports whose names nothing else uses (a statement importing other modules too
    keeps those)."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()

    def visit_Module(self, node: cst.Module) -> None:
        self.used = used_outside_imports(node)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        if len(updated.body) != 1:
            return updated
        small = updated.body[0]
        if isinstance(small, cst.Import) and not _is_xla_import(small):
            kept = [a for a in small.names if not (_is_xla_name(a) and _bound(cst.Import([a])) - self.used == _bound(cst.Import([a])))]
            if len(kept) < len(small.names):
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(body=[small.with_changes(names=kept)])
            return updated
        if not _is_xla_import(small) or _bound(small) & self.used:
            return updated
        shown = " ".join(cst.Module([]).code_for_node(small).split())[:70]
        return edits.replace_statement(updated, "", f"# {shown}: not needed on neuron {edits.MARK}")


def _is_xla_name(alias: cst.ImportAlias) -> bool:
    return (dotted(alias.name) or "").split(".")[0] == "torch_xla"


def _is_xla_import(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Import):
        return all((dotted(a.name) or "").split(".")[0] == "torch_xla" for a in small.names)
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        return (dotted(small.module) or "").split(".")[0] == "torch_xla" and not isinstance(small.names, cst.ImportStar)
    return False


def _bound(small: cst.BaseSmallStatement) -> set[str]:
    names = small.names  # type: ignore[attr-defined]
    if isinstance(small, cst.Import):
        return {a.asname.name.value if a.asname else (dotted(a.name) or "").split(".")[0] for a in names}
    return {a.asname.name.value if a.asname else (dotted(a.name) or "") for a in names}


def used_outside_imports(module: cst.Module) -> set[str]:
    """The names a module uses outside its import statements."""
    used: set[str] = set()

    def walk(node: cst.CSTNode) -> None:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return
        if isinstance(node, cst.Name):
            used.add(node.value)
        for child in node.children:
            walk(child)

    walk(module)
    return used



def _positional(call: cst.Call, rule: Rule) -> int:
    """How many positional arguments the call passes, counting keywords that name the rule's `parameters`."""
    count = sum(1 for a in call.args if a.keyword is None and not a.star)
    named = {a.keyword.value for a in call.args if a.keyword is not None}
    for name in rule.parameters[count:]:
        if name not in named:
            break
        count += 1
    return count


