"""The matchers: one libcst pass over a module that finds every use a rule in `rules.py` is about and, for
`rewrite` rules where a mechanical edit keeps every path the script took before, builds the rewritten node
(libcst keeps everything else byte for byte, so the diff shows only the fixed code). CUDA checks follow
`guards.py`: kept as they read without CUDA, unless their torch.accelerator form provably changes nothing
the script computes."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import libcst as cst
from libcst.metadata import (
    ParentNodeProvider,
    PositionProvider,
    QualifiedName,
    QualifiedNameProvider,
    QualifiedNameSource,
)

from neuronkit.port import edits
from neuronkit.port.cst_util import code, dotted, expr, literal_string, walk
from neuronkit.port.guard_rewrites import GuardRewrites
from neuronkit.port.guards import CHECK_LITERAL, Checks, comparison_check, startswith_check
from neuronkit.port.rules import Rule, load_rules, rule_by_id, rule_for_name
from neuronkit.port.xla_rewrites import XlaRewrites

# `from torch.cuda.amp import GradScaler, autocast`: the same names in torch.amp, which take the device first.
AMP_NAMES = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.autocast"})
PROCESS_GROUP = "torch.distributed.init_process_group"
# The note of a call whose rule `raises` (without CUDA) at a place neuron reaches: a blocker.
RAISES = ("raises here on Trainium, which has no CUDA (\"Torch not compiled with CUDA enabled\" with a CPU build of "
          "torch, \"Found no NVIDIA driver on your system\" with a CUDA build), and nothing on the way (a CUDA check "
          "that stays, a try/except, an earlier return) keeps neuron from it")
AT_CALL = frozenset({"autocast", "grad_scaler", "template", "statement", "add_keyword"})  # fixes made at the call
SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                      "torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch"})


@dataclass(frozen=True)
class Finding:
    """One CUDA- or XLA-specific use: where, what (the source text), the rule, whether `--write` fixes it,
    its category (the rule's, or `decide` for a blocker only a branch not taken on neuron reaches) and a note
    about this use (both branches of a check, the plan for parallel layers)."""

    path: str
    line: int
    col: int  # 1-based
    code: str
    rule: Rule
    detail: str  # the qualified name, method or literal matched
    fixed: bool  # the rewrite is applied by --write / --diff
    category: str = ""
    note: str | None = None

    def __post_init__(self) -> None:
        if not self.category:
            object.__setattr__(self, "category", self.rule.category)


@dataclass(frozen=True)
class ProjectFacts:
    """What the whole project does that some rewrites (and `--run`) depend on: whether it starts several
    processes (`distributed`), makes its own process group (`own_group`), starts its own processes with
    torch.multiprocessing or xmp.spawn (`spawns`)."""

    distributed: bool = False
    own_group: bool = False
    spawns: bool = False


class _Calls(cst.CSTVisitor):
    """The qualified names of every call in a module."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.names.update(q.name for q in self.get_metadata(QualifiedNameProvider, node.func, set()))


def called_names(module: cst.MetadataWrapper) -> set[str]:
    """Every fully qualified name the module calls."""
    finder = _Calls()
    module.visit(finder)
    return finder.names


def facts_from(names: set[str]) -> ProjectFacts:
    """The project's facts from the names its modules call."""
    return ProjectFacts(distributed=bool(names & (SPAWNERS | {PROCESS_GROUP})), own_group=PROCESS_GROUP in names,
                        spawns=bool(names & SPAWNERS))


def _string(value: str, like: cst.SimpleString) -> cst.SimpleString:
    return like.with_changes(value=f"{like.prefix}{like.quote}{value}{like.quote}")


def _neuron(value: str) -> str:
    return re.sub(r"^(cuda|xla)", "neuron", value)


class PortMatcher(GuardRewrites, XlaRewrites, cst.CSTTransformer):
    """Collects `findings` for one module while transforming it; the result is the rewritten module. The CUDA
    checks are `GuardRewrites`' (guard_rewrites.py), the XLA calls `XlaRewrites`' (xla_rewrites.py)."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ParentNodeProvider)

    def __init__(self, path: str, facts: ProjectFacts = ProjectFacts()) -> None:
        super().__init__()
        self.path = path
        self.facts = facts
        self.findings: list[Finding] = []
        self.helpers: set[str] = set()
        self.line_map: list[int] = []  # the original's line of each line of the rewritten module
        self.added_lines: set[int] = set()  # lines of the rewritten module the original has not (the helpers)
        self._import_depth = 0
        self._rules = load_rules()
        self._methods = {r.method: r for r in self._rules if r.method}
        self._strings = [r for r in self._rules if (r.string_values or r.value_regex) and not r.keyword]
        self._keywords = [r for r in self._rules if r.keyword]
        self._missing = [r for r in self._rules if r.missing_keyword]
        guard_rules = {name: r.id for r in self._rules if r.guard for name in r.names}
        guard_attributes = {r.method: r.id for r in self._rules if r.guard and r.method}
        self.checks = Checks(self._resolve, guard_rules, guard_attributes)
        self._fixed_imports: set[str] = set()  # names imported from torch.neuron by a fixed import line
        self._amp_names: set[str] = set()  # local names of torch.cuda.amp imports moved to torch.amp
        self._init_guards()
        self._init_xla()

    # --- bookkeeping -------------------------------------------------------------------------------------
    def _resolve(self, node: cst.CSTNode) -> set[str]:
        names: set[QualifiedName] = self.get_metadata(QualifiedNameProvider, node, set())
        return {q.name for q in names if q.source is QualifiedNameSource.IMPORT or q.name.startswith("builtins.")}

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _add(self, node: cst.CSTNode, rule: Rule, detail: str, fixed: bool, note: str | None = None,
             category: str = "") -> int:
        if id(node) in self._folded:
            return -1
        start = self.get_metadata(PositionProvider, node).start
        text = self.module.code_for_node(node)
        finding = Finding(self.path, start.line, start.column + 1, " ".join(text.split())[:80], rule, detail,
                          fixed and rule.category == "rewrite", category, note)
        if rule.raises and finding.category == "decide" and self._raising_call(node):
            finding = replace(finding, category="blocker", note=f"{note}; {RAISES}" if note else RAISES)
        self.findings.append(finding)
        return len(self.findings) - 1

    def _raising_call(self, func: cst.CSTNode) -> bool:
        """Whether `func` is called (not imported or passed on) where neuron reaches it."""
        call = self.get_metadata(ParentNodeProvider, func, None)
        return isinstance(call, cst.Call) and call.func is func and self._reached_on_neuron(call)

    def _fails_on_neuron(self, node: cst.CSTNode) -> bool:
        """A call that raises on neuron even rewritten (its rule `raises` and has no fix, or the script reads
        what the fix's target lacks): a guard around it is kept, not rewritten to run it on neuron."""
        if not isinstance(node, cst.Call):
            return False
        rules = [rule for name in self._imported_names(node.func) if (rule := rule_for_name(name)) and rule.raises]
        return any(rule.fix is None or self._lacking_attributes(node.func, rule) for rule in rules)

    def _lacking_attributes(self, func: cst.CSTNode, rule: Rule) -> list[str]:
        """The attributes a call of `func` reads of its result that the rule's target does not return: `f().x`,
        or `r = f()` then `r.x` in the same function (or module)."""
        call = self.get_metadata(ParentNodeProvider, func, None)
        if not (isinstance(call, cst.Call) and call.func is func):
            return []
        parent = self.get_metadata(ParentNodeProvider, call, None)
        read: set[str] = set()
        if isinstance(parent, cst.Attribute) and parent.value is call:
            read.add(parent.attr.value)
        elif isinstance(parent, cst.Assign) and len(parent.targets) == 1 and \
                isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            scope: cst.CSTNode | None = parent
            while scope is not None and not isinstance(scope, (cst.FunctionDef, cst.Module)):
                scope = self.get_metadata(ParentNodeProvider, scope, None)
            read.update(n.attr.value for n in walk(scope or self.module) if isinstance(n, cst.Attribute)
                        and isinstance(n.value, cst.Name) and n.value.value == name)
        return sorted(read - set(rule.result_attributes))

    def _mark_fixed(self, index: int) -> None:
        if index >= 0:
            self.findings[index] = replace(self.findings[index], fixed=True)

    def _imported_names(self, node: cst.CSTNode) -> list[str]:
        names: set[QualifiedName] = self.get_metadata(QualifiedNameProvider, node, set())
        return sorted(q.name for q in names if q.source is QualifiedNameSource.IMPORT)

    # --- the module --------------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.module = node
        self.checks.collect_flags(node)
        self._amp_imports_movable = self._amp_only_called(node)
        self._assigned = _assigned_values(node)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        updated = self._drop_unused_xla_imports(updated)
        updated = edits.sweep_removed(updated)
        with_helpers = edits.insert_helpers(updated, self.helpers)
        self.line_map, self.added_lines = edits.line_map(updated.code, with_helpers.code)
        updated = with_helpers
        self._note_guards()
        self._note_plans()
        return updated

    def _amp_only_called(self, module: cst.Module) -> bool:
        """Whether every use of a name imported from torch.cuda.amp (GradScaler, autocast) is a call."""
        for node in walk(module):
            if isinstance(node, cst.Call):
                continue
            if isinstance(node, cst.Name) and set(self._imported_names(node)) & AMP_NAMES:
                parent = self.get_metadata(ParentNodeProvider, node, None)
                if not (isinstance(parent, cst.Call) and parent.func is node) and \
                        not isinstance(parent, (cst.ImportAlias, cst.AsName)):
                    return False
        return True

    # --- imports -----------------------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        self._import_depth += 1
        for alias in node.names:
            name = dotted(alias.name) or ""
            if name == "torch_xla" or name.startswith("torch_xla."):
                bound = alias.asname.name.value if alias.asname else name.split(".")[0]  # type: ignore[union-attr]
                self._xla_imports.append((self._add(node, rule_by_id("xla-import"), name, False), {bound}))
            elif (rule := rule_for_name(name)) and rule.prefix and rule.category == "blocker":
                self._add(alias, rule, name, False)

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        self._import_depth -= 1
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import_depth += 1

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.BaseSmallStatement:
        self._import_depth -= 1
        module = dotted(original.module) if original.module and not original.relative else None
        if module is not None and (module == "torch_xla" or module.startswith("torch_xla.")):
            bound = set() if isinstance(original.names, cst.ImportStar) else {
                (a.asname.name.value if a.asname else dotted(a.name)) for a in original.names}  # type: ignore[union-attr]
            self._xla_imports.append((self._add(original, rule_by_id("xla-import"), module, False), bound))
            return updated
        if module is None or isinstance(original.names, cst.ImportStar):
            if module and (rule := rule_for_name(module)):
                self._add(original, rule, module, False)
            return updated
        hits = [(alias, f"{module}.{dotted(alias.name)}") for alias in original.names]
        hits = [(alias, name, rule) for alias, name in hits if (rule := rule_for_name(name))]
        # `from torch.cuda import synchronize, empty_cache`: the same names exist in torch.neuron
        same_name = module == "torch.cuda" and len(hits) == len(original.names) and all(
            rule.fix == "rename" and rule.target == "torch.neuron." + name.rsplit(".", 1)[1] for _, name, rule in hits)
        # `from torch.cuda.amp import GradScaler, autocast`: torch.amp's, called with the device first
        amp = module == "torch.cuda.amp" and len(hits) == len(original.names) and self._amp_imports_movable and \
            all(name in AMP_NAMES for _, name, _ in hits)
        for alias, name, rule in hits:
            self._add(alias, rule, name, same_name or amp)
        local = {(alias.asname.name.value if alias.asname else dotted(alias.name)) for alias, _, _ in hits}  # type: ignore[union-attr]
        if same_name:
            self._fixed_imports.update(local)  # type: ignore[arg-type]
            return updated.with_changes(module=expr("torch.neuron"))
        if amp:
            self._amp_names.update(local)  # type: ignore[arg-type]
            return updated.with_changes(module=expr("torch.amp"))
        return updated

    # --- names and attributes ----------------------------------------------------------------------------
    def _outermost(self, node: cst.CSTNode) -> bool:
        parent = self.get_metadata(ParentNodeProvider, node, None)
        return not (isinstance(parent, cst.Attribute) and parent.value is node)

    def _has_rule(self, node: cst.CSTNode) -> bool:
        return any(rule_for_name(name) for name in self._imported_names(node))

    def _reference(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        # `f(x).attr` resolves to f's name plus `.attr` in libcst; only a plain dotted chain names a thing
        if self._import_depth or not self._outermost(original) or dotted(original) is None:
            return updated
        for name in self._imported_names(original):
            rule = rule_for_name(name)
            if rule is None:
                continue
            spelled = dotted(original) == name
            if rule.guard:
                return self._query(original, updated, rule, name)
            if rule.fix == "rename_last":
                self._add(original, rule, name, True)
                assert isinstance(updated, cst.Attribute) and rule.target
                return updated.with_changes(attr=cst.Name(rule.target))
            if rule.result_attributes and (lacking := self._lacking_attributes(original, rule)):
                self._add(original, rule, name, False, category="decide", note=(
                    f"reads {', '.join('.' + a for a in lacking)} of the result, which TorchNeuron's lacks (it has "
                    f"{', '.join('.' + a for a in rule.result_attributes)}): not renamed"))
                return updated
            if rule.fix == "rename" and not spelled and dotted(original) in self._fixed_imports:
                return updated  # its import line was rewritten to torch.neuron
            if rule.fix in AT_CALL or rule.missing_keyword:
                parent = self.get_metadata(ParentNodeProvider, original, None)
                if isinstance(parent, cst.Call) and parent.func is original or isinstance(parent, cst.Decorator):
                    return updated  # found (and fixed) at the call: leave_Call
                if rule.missing_keyword:
                    return updated
            fixed = spelled and rule.fix == "rename"
            index = self._add(original, rule, name, fixed)
            if rule.id == "nxd-parallel-layers":
                self._plan_entry(original, name.rsplit(".", 1)[1], index)
            return expr(rule.target) if fixed and rule.target else updated
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        parent = self.get_metadata(ParentNodeProvider, original, None)
        if isinstance(parent, cst.Attribute) and parent.attr is original:
            return updated  # the attribute part of a chain: the chain is matched as a whole
        return self._reference(original, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        rule = self._methods.get(original.attr.value)
        if rule and rule.attribute and not self._has_rule(original) and not self._import_depth:
            if rule.guard:
                if id(original) in self._rewrite_checks:
                    return updated.with_changes(attr=cst.Name(rule.target))
                self._check_found(original, rule, "." + original.attr.value)
                return updated
            self._add(original, rule, "." + original.attr.value, True)
            return updated.with_changes(attr=cst.Name(rule.target))
        return self._reference(original, updated)

    # --- calls: methods, autocast, keywords, templates --------------------------------------------------
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        check = startswith_check(original)
        if check and id(original) not in self._rewrite_checks and not self._import_depth:
            self._check_found(original, rule_by_id(check.rule_id), code(original))
        updated = self._keywords_of(original, updated)
        updated = self._missing_keywords(original, updated)
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value == "per_device_loader":
            chained = self._parallel_loader(original, updated)
            if chained is not None:
                return chained
        if isinstance(func, cst.Attribute) and not self._has_rule(func):
            rule = self._methods.get(func.attr.value)
            if rule and not rule.attribute:
                self._add(original, rule, f".{func.attr.value}()", rule.fix is not None)
                return self._to_device(updated) if rule.fix == "to_device" else updated
        for name in self._imported_names(func):
            rule = rule_for_name(name)
            if rule is None:
                continue
            if rule.device_argument and rule.fix == "rename" and \
                    (dotted(func) == name or dotted(func) in self._fixed_imports):
                return self._device_argument(original, updated, rule)
            if name in AMP_NAMES and isinstance(func, cst.Name) and func.value in self._amp_names:
                self._add(func, rule, name, True)
                return updated.with_changes(args=[cst.Arg(cst.SimpleString('"neuron"')), *updated.args])
            if rule.fix == "autocast":
                spelled = dotted(func) == name
                self._add(func, rule, name, spelled)
                if not spelled:
                    return updated
                return updated.with_changes(func=expr(rule.target),
                                            args=[cst.Arg(cst.SimpleString('"neuron"')), *updated.args])
            if rule.fix == "grad_scaler":
                return self._grad_scaler(original, updated, rule, name)
            if rule.fix == "template":
                return self._template(original, updated, rule, name)
            if rule.fix == "statement" and not self._own_statement(original):
                self._add(original, rule, name, False)
        return updated

    def _grad_scaler(self, original: cst.Call, updated: cst.Call, rule: Rule, name: str) -> cst.BaseExpression:
        """A GradScaler made for the device: `torch.cuda.amp.GradScaler(...)` ->
        `torch.amp.GradScaler("neuron", ...)`; `torch.amp.GradScaler()` gets the device it defaulted to CUDA."""
        func = original.func
        device = next((a.value for a in original.args if a.keyword is None),
                      next((a.value for a in original.args if a.keyword and a.keyword.value == "device"), None))
        neuron = cst.Arg(cst.SimpleString('"neuron"'))
        if name == "torch.cuda.amp.GradScaler":
            if dotted(func) == name:
                self._add(func, rule, name, True)
                return updated.with_changes(func=expr("torch.amp.GradScaler"), args=[neuron, *updated.args])
            self._add(func, rule, name, False)
            return updated
        value = literal_string(device) if device is not None else None
        if device is not None and value is None:
            return updated  # a device named at run time: the device-agnostic form (a run warns if it is CUDA's)
        if value is not None and re.match(r"^neuron(:\d+)?$", value):
            return updated  # made for the device already (ported code): nothing to change
        fixed = device is None or re.match(r"^(cuda|neuron)", value or "") is not None
        if device is None:
            updated = updated.with_changes(args=[neuron, *updated.args])
        self._add(func, rule, name, fixed)
        return updated

    def _device_argument(self, original: cst.Call, updated: cst.Call, rule: Rule) -> cst.Call:
        """A renamed call whose target takes its device as an index or a torch.device only (S's torch.neuron
        passes a string on to code that raises): a device string the script passes is wrapped in torch.device(),
        and torch.accelerator's `device_index=` keyword is the target's `device=`."""
        args = list(updated.args)
        index = next((i for i, a in enumerate(original.args) if a.keyword and a.keyword.value == rule.device_argument),
                     0 if original.args and original.args[0].keyword is None and not original.args[0].star else None)
        if index is None:
            return updated
        arg = args[index]
        if arg.keyword is not None and arg.keyword.value != "device":
            arg = arg.with_changes(keyword=cst.Name("device"))
        if self._stringy(original.args[index].value):
            arg = arg.with_changes(value=cst.Call(expr("torch.device"), [cst.Arg(arg.value)]))
            start = self.get_metadata(PositionProvider, original.func).start
            for i, finding in enumerate(self.findings):
                if finding.rule is rule and (finding.line, finding.col) == (start.line, start.column + 1):
                    self.findings[i] = replace(finding, note=(
                        "its device string is passed as torch.device(...): TorchNeuron's takes an index or a "
                        "torch.device, and raises for a string"))
        args[index] = arg
        return updated.with_changes(args=args)

    def _stringy(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether an expression is (or may be) a string: a literal or a formatted one, `str(...)`, a choice
        with a string arm, or a name (an argparse option) the module gives such a value."""
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Modulo, cst.Add)):
            return self._stringy(node.left, depth)
        if isinstance(node, cst.IfExp):
            return self._stringy(node.body, depth) or self._stringy(node.orelse, depth)
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
                return self._stringy(node.func.value, depth)
            return "builtins.str" in self._resolve(node.func)
        key = node.value if isinstance(node, cst.Name) else \
            "." + node.attr.value if isinstance(node, cst.Attribute) else None
        values = self._assigned.get(key, []) if key is not None and depth < 4 else []
        if any(isinstance(value, cst.Name) and value.value == "None" for value in values):
            return False  # torch.device(None) raises: left as it was
        return any(value == "str" or isinstance(value, cst.BaseExpression) and self._stringy(value, depth + 1)
                   for value in values)

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        """`@torch.compile` with no backend: `@torch.compile(backend="neuron")`."""
        deco = original.decorator
        if isinstance(deco, (cst.Name, cst.Attribute)):
            for name in self._imported_names(deco):
                rule = rule_for_name(name)
                if rule is not None and rule.fix == "add_keyword":
                    self._add(deco, rule, name, True)
                    keyword, value = rule.replacement.split("=", 1)  # type: ignore[union-attr]
                    call = cst.Call(func=updated.decorator, args=[
                        cst.Arg(expr(value), keyword=cst.Name(keyword),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
                    return updated.with_changes(decorator=call)
        return updated

    @staticmethod
    def _to_device(call: cst.Call) -> cst.Call:
        """`x.cuda()` -> `x.to("neuron")`; `x.cuda(0)` -> `x.to("neuron:0")`; `x.cuda(d)` -> `x.to(d)` (an index
        or a torch.device, as `.cuda` takes them); keywords kept."""
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
            target = device
        args = [cst.Arg(target), *rest]
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=args)

    def _keyword_hits(self, call: cst.Call) -> list[tuple[int, Rule, object]]:
        """The keyword rules a call's arguments match: (the argument's index, the rule, its literal value or
        _NO_LITERAL); the positional argument at a rule's `position` is its keyword (`torch.Generator("cuda")`)."""
        callee = set(self._imported_names(call.func))
        hits: list[tuple[int, Rule, object]] = []
        positional = [a for a in call.args if a.keyword is None]
        for index, arg in enumerate(call.args):
            if arg.star:
                continue
            for rule in self._keywords:
                if rule.calls and not callee & set(rule.calls):
                    continue
                if arg.keyword is not None and rule.keyword != arg.keyword.value or arg.keyword is None and (
                        rule.position is None or rule.position >= len(positional) or positional[rule.position] is not arg):
                    continue
                value = _literal(arg.value)
                if rule.keyword_values and (value is _NO_LITERAL or value not in rule.keyword_values):
                    continue
                if rule.value_regex and value is not _NO_LITERAL and not (
                        isinstance(value, str) and rule.matches_string(value)):
                    continue
                hits.append((index, rule, value))
        return hits

    def _keywords_of(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        drop: set[str] = set()
        args = list(updated.args)
        for index, rule, value in self._keyword_hits(original):
            arg = original.args[index]
            shown = f"{rule.keyword}={value!r}" if value is not _NO_LITERAL else f"{rule.keyword}=..."
            literal = arg.value if isinstance(arg.value, cst.SimpleString) else None
            fixed = rule.fix == "drop_keyword" or rule.fix == "string" and literal is not None
            self._add(arg, rule, shown, fixed)
            if rule.fix == "drop_keyword":
                drop.add(rule.keyword)  # type: ignore[arg-type]
            elif fixed and literal is not None:  # the literal -> `replacement`
                args[index] = args[index].with_changes(value=_string(rule.replacement or "", literal))
        if drop:
            args = [a for a in args if a.keyword is None or a.keyword.value not in drop]
            if args:
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=args) if drop or args != list(updated.args) else updated

    def _keyword_literal(self, node: cst.SimpleString) -> bool:
        """Whether a string literal is an argument a keyword rule rewrites (`torch.Generator(device="cuda")`
        is not a device string: its own rule makes it "cpu")."""
        arg, call = self._argument_of(node)
        return call is not None and any(
            call.args[index] is arg and rule.fix == "string" for index, rule, _ in self._keyword_hits(call))

    def _argument_of(self, node: cst.CSTNode) -> tuple[cst.Arg | None, cst.Call | None]:
        """The argument `node` is, and the call it is passed to; (None, None) when it is not an argument."""
        arg = self.get_metadata(ParentNodeProvider, node, None)
        call = self.get_metadata(ParentNodeProvider, arg, None) if isinstance(arg, cst.Arg) else None
        return (arg, call) if isinstance(call, cst.Call) else (None, None)

    def _attribute_name(self, node: cst.SimpleString) -> bool:
        """Whether a string literal names an attribute of torch or of a torch module (`getattr(torch, "cuda")`,
        `hasattr(torch.backends, "cuda")`): not a device; renamed, it would name torch.neuron, and a check that reads
        False on neuron, as `torch.cuda.is_available()` does, would read True."""
        arg, call = self._argument_of(node)
        return call is not None and bool(self._resolve(call.func) & {"builtins.getattr", "builtins.hasattr"}) \
            and len(call.args) >= 2 and call.args[1] is arg and \
            any(name == "torch" or name.startswith("torch.") for name in self._resolve(call.args[0].value))

    def _check_label(self, node: cst.SimpleString) -> bool:
        """Whether a string literal is an arm of `"cuda" if t.is_cuda else "not cuda"` (not a device choice): a
        label of the check, which reads as without CUDA on neuron (False), so its label stays as it read there."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if not isinstance(parent, cst.IfExp) or node is parent.test or self.checks.device_choice(parent):
            return False
        checks, flags = self.checks.find(parent.test)
        attributes = set(self.checks.guard_attributes.values())
        return bool(checks) and not flags and all(c.rule_id in attributes and isinstance(c.node, cst.Attribute)
                                                  for c in checks)

    def _formatted(self, node: cst.SimpleString) -> cst.BaseExpression | None:
        """The expression a string literal is formatted in, as an f-string is: `"cuda:%d" % rank`,
        `"cuda:{}".format(rank)`, `"cuda:" + str(rank)`."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if isinstance(parent, cst.BinaryOperation) and parent.left is node and \
                isinstance(parent.operator, (cst.Modulo, cst.Add)):
            return parent
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "format":
            call = self.get_metadata(ParentNodeProvider, parent, None)
            if isinstance(call, cst.Call) and call.func is parent:
                return call
        return None

    def _missing_keywords(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """A call without a keyword its rule asks for (`torch.compile(model)`, `torch.load(path)`)."""
        callee = set(self._imported_names(original.func))
        for rule in self._missing:
            if not callee & set(rule.names):
                continue
            positional = sum(1 for a in original.args if a.keyword is None and not a.star)
            if any(a.keyword and a.keyword.value == rule.missing_keyword for a in original.args) or \
                    any(a.star for a in original.args) or positional > (rule.position or 0):
                continue
            fixed = rule.fix == "add_keyword"
            self._add(original.func, rule, f"{dotted(original.func) or 'call'}(...)", fixed)
            if fixed:
                keyword, value = rule.replacement.split("=", 1)  # type: ignore[union-attr]
                args = list(updated.args)
                if args:
                    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(cst.Arg(expr(value), keyword=cst.Name(keyword),
                                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
                updated = updated.with_changes(args=args)
        return updated

    # --- string literals ---------------------------------------------------------------------------------
    def _check_literal_owner(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The comparison (or `.startswith` call) a string literal is compared in, if any."""
        current = node
        for _ in range(4):
            parent = self.get_metadata(ParentNodeProvider, current, None)
            if parent is None:
                return None
            if isinstance(parent, cst.Comparison) and comparison_check(parent):
                return parent
            if isinstance(parent, cst.Call) and startswith_check(parent):
                return parent
            if not isinstance(parent, (cst.ComparisonTarget, cst.Element, cst.Tuple, cst.List, cst.Set, cst.Arg)):
                return None
            current = parent
        return None

    def _written(self, node: cst.SimpleString) -> bool:
        """Whether a string literal is a key being written: `os.environ[KEY] = v`, `setdefault(KEY, v)`,
        `putenv(KEY, v)`, or a key of a dict literal."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if isinstance(parent, cst.DictElement) and parent.key is node:
            return True
        if isinstance(parent, cst.Arg):
            call = self.get_metadata(ParentNodeProvider, parent, None)
            return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and \
                call.func.attr.value in ("setdefault", "putenv") and call.args[0] is parent
        if isinstance(parent, cst.Index):
            element = self.get_metadata(ParentNodeProvider, parent, None)
            subscript = self.get_metadata(ParentNodeProvider, element, None)
            target = self.get_metadata(ParentNodeProvider, subscript, None)
            return isinstance(target, (cst.AssignTarget, cst.AugAssign))
        return False

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.BaseExpression:
        if self._import_depth:
            return updated
        value = literal_string(original)
        if value is None:
            return updated
        owner = self._check_literal_owner(original) if CHECK_LITERAL.match(value) else None
        if owner is not None:
            return _string(_neuron(value), updated) if id(owner) in self._rewrite_checks else updated
        if self._keyword_literal(original):
            return updated  # rewritten with its call (leave_Call)
        if self._attribute_name(original) or self._check_label(original):
            return updated  # not a device
        for rule in self._strings:
            formatted = self._formatted(original) if rule.fstring_prefix and \
                value.startswith(rule.fstring_prefix) else None
            if formatted is not None:  # "cuda:%d" % rank: as the f-string f"cuda:{rank}"
                self._add(formatted, rule, self.module.code_for_node(formatted), True)
                return _string(_neuron(value), updated)
            if rule.matches_string(value):
                fixed = rule.fix == "string" and (not rule.writes_only or self._written(original))
                self._add(original, rule, repr(value), fixed)
                if not fixed:
                    return updated
                return _string(rule.replacement if rule.replacement is not None else _neuron(value), updated)
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
                new_first = text.with_changes(value=_neuron(text.value))
                return updated.with_changes(parts=[new_first, *updated.parts[1:]])
        return updated


def _assigned_values(module: cst.Module) -> dict[str, list[cst.BaseExpression | str]]:
    """What the module gives each name (`name = v`, `name: T = v`, a parameter's default) and each argparse
    option (`".name"`: `add_argument("--name", default=v)`, or "str" for `type=str`), in any scope."""
    found: dict[str, list[cst.BaseExpression | str]] = {}
    for node in walk(module):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    found.setdefault(target.target.value, []).append(node.value)
        elif isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name) and node.value is not None:
            found.setdefault(node.target.value, []).append(node.value)
        elif isinstance(node, cst.Param) and node.default is not None:
            found.setdefault(node.name.value, []).append(node.default)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value == "add_argument":
            flags = [v for a in node.args if a.keyword is None and (v := literal_string(a.value))]
            option = next((f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")), None)
            for a in node.args:
                if option and a.keyword and a.keyword.value == "default":
                    found.setdefault("." + option, []).append(a.value)
                elif option and a.keyword and a.keyword.value == "type" and \
                        isinstance(a.value, cst.Name) and a.value.value == "str":
                    found.setdefault("." + option, []).append("str")
    return found


_NO_LITERAL = object()


def _literal(node: cst.BaseExpression) -> object:
    """The value of a string / True / False / None literal, else a sentinel."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    return _NO_LITERAL
