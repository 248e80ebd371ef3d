"""CUDA checks and what they guard: the reading `neuronkit port` keeps behaviour-preserving.

A check is an expression whose value says "CUDA is here": a CUDA query (`torch.cuda.is_available()`,
`device_count()`, `t.is_cuda`), a device compared with "cuda" (`device.type == "cuda"`, `"cuda" in device`,
`str(d).startswith("cuda")`), or a flag assigned from one (`use_cuda = ... torch.cuda.is_available()`). On
Trainium every check reads as it did on a machine without CUDA, so the script keeps the paths it took there.
A check is rewritten to its torch.accelerator form (true on neuron) only where that cannot change what the
script computes:

- a *device choice*: `A if CHECK else B` whose arms name devices (or move a value to one, against the value
  itself): only where the work runs changes;
- a *device guard*: `if CHECK:` whose branches only move work to the device or keep device bookkeeping
  (synchronize, seeds, memory statistics and their printing, cuDNN flags).

Everything else (a branch that wraps the model in DataParallel, sets DataLoader workers, picks a dtype) is a
decision for a person, shown with both branches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from neuronkit.port.cst_util import code, literal_string

# Strings naming a device, or a process-group backend, in a device choice's arms.
DEVICE_LITERAL = re.compile(r"^(cuda|cpu|mps|xpu|xla|neuron|hpu|meta)(:\d+)?$")
BACKENDS = frozenset({"nccl", "gloo", "mpi", "ucc", "neuron", "xla"})
# The device names a check compares with, and the rule each comparison is reported under.
CHECKED_DEVICES = {"cuda": "cuda-check", "xla": "xla-check"}
CHECK_LITERAL = re.compile(r"^(cuda|xla)(:\d+)?$")
COMPARISONS = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn, cst.Is, cst.IsNot)
# Calls whose only effect is device bookkeeping: a branch of them computes nothing the script uses.
BOOKKEEPING = frozenset(f"torch.cuda.{name}" for name in (
    "synchronize", "empty_cache", "reset_peak_memory_stats", "reset_max_memory_allocated",
    "reset_accumulated_memory_stats", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_device",
    "ipc_collect"))
# Calls that only read: device facts, and the builtins that format them for printing.
READERS = frozenset({*(f"torch.cuda.{name}" for name in (
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "get_device_name",
    "memory_summary", "device_count", "current_device", "get_device_properties", "is_available")),
    "builtins.str", "builtins.round", "builtins.int", "builtins.float", "builtins.len", "builtins.format",
    "builtins.repr"})
BUILTIN_READERS = frozenset(name for name in READERS if name.startswith("builtins."))
PRINTERS = frozenset({"builtins.print"})
# Other accelerators' checks: not reported (nothing to port), but they read False on neuron too.
OTHER_ACCELERATOR_ATTRIBUTES = frozenset({"is_xpu", "is_mps", "is_hpu", "is_mtia", "is_ipu"})
OTHER_ACCELERATOR_QUERIES = frozenset({"torch.xpu.is_available", "torch.mps.is_available",
                                       "torch.backends.mps.is_available", "torch.backends.mps.is_built",
                                       "torch.mtia.is_available", "torch.hpu.is_available"})
LOG_METHODS = frozenset({"debug", "info", "warning", "log"})
MOVES = frozenset({"cuda", "to"})
# Methods a move may be chained through without changing the value (`x.pin_memory().to(d, non_blocking=True)`).
MOVE_CHAIN = frozenset({"cuda", "to", "pin_memory", "contiguous", "cpu"})

Resolve = Callable[[cst.CSTNode], set[str]]  # a node's fully qualified names (imports resolved)


def _children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `node` (itself included), not entering lambdas or comprehensions' own scopes."""
    yield node
    if isinstance(node, cst.Lambda):
        return
    for child in node.children:
        yield from _children(child)


@dataclass(frozen=True)
class Check:
    """One CUDA check in an expression: the node a finding is reported at, its rule, and how it reads on
    neuron without a rewrite (False, True, 0, or None when it depends on something else)."""

    node: cst.CSTNode
    rule_id: str
    value: object


def _is_check_literal(node: cst.CSTNode) -> bool:
    value = literal_string(node)
    if value is not None:
        return CHECK_LITERAL.match(value) is not None
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(_is_check_literal(e.value) for e in node.elements)
    return False


def _checked_device(node: cst.CSTNode) -> str:
    for sub in _children(node):
        value = literal_string(sub)
        if value is not None and CHECK_LITERAL.match(value):
            return value.split(":")[0]
    return "cuda"


def comparison_check(node: cst.Comparison) -> Check | None:
    """`x == "cuda"`, `"cuda" in x`, `x.type != "cuda"`, `t in ("cuda", "xpu")`: a check (its value on
    neuron, where the device compared is not CUDA: `==`/`in` False, `!=`/`not in` True)."""
    operands = [node.left, *(t.comparator for t in node.comparisons)]
    if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, COMPARISONS):
        return None
    if not any(_is_check_literal(o) for o in operands):
        return None
    negative = isinstance(node.comparisons[0].operator, (cst.NotEqual, cst.NotIn, cst.IsNot))
    return Check(node, CHECKED_DEVICES[_checked_device(node)], negative)


def startswith_check(node: cst.Call) -> Check | None:
    """`str(device).startswith("cuda")`: a check, False on neuron."""
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith") and node.args and \
            _is_check_literal(node.args[0].value):
        return Check(node, CHECKED_DEVICES[_checked_device(node.args[0].value)], False)
    return None


class Checks:
    """Finds checks and judges what they guard, for one module. `guard_rules` maps each CUDA query's
    qualified name (the rules with `guard = true`) to its rule id; `flags` are names assigned from a check."""

    def __init__(self, resolve: Resolve, guard_rules: dict[str, str], guard_attributes: dict[str, str]) -> None:
        self.resolve = resolve
        self.guard_rules = guard_rules
        self.guard_attributes = guard_attributes
        self.flags: dict[str, cst.BaseExpression] = {}

    # --- finding checks ----------------------------------------------------------------------------------
    def query(self, node: cst.CSTNode) -> str | None:
        """The rule id when `node` is a reference to a CUDA query (`torch.cuda.is_available`, `t.is_cuda`)."""
        if isinstance(node, cst.Attribute) and node.attr.value in self.guard_attributes and \
                not (self.resolve(node) & set(self.guard_rules)):
            return self.guard_attributes[node.attr.value]
        if isinstance(node, (cst.Name, cst.Attribute)):
            for name in self.resolve(node):
                if name in self.guard_rules:
                    return self.guard_rules[name]
        return None

    def find(self, expr: cst.CSTNode, skip_choices: bool = False) -> tuple[list[Check], list[cst.Name]]:
        """The checks in `expr` and the flags it reads (`skip_choices`: not those inside a device choice)."""
        checks: list[Check] = []
        flags: list[cst.Name] = []
        skipped = {id(n) for choice in _children(expr) if skip_choices and self.device_choice(choice)
                   for n in _children(choice)}
        for node in _children(expr):
            if id(node) in skipped:
                continue
            if isinstance(node, cst.Comparison) and (check := comparison_check(node)):
                checks.append(check)
            elif isinstance(node, cst.Call) and (check := startswith_check(node)):
                checks.append(check)
            elif (rule_id := self.query(node)) is not None:
                checks.append(Check(node, rule_id, 0 if rule_id == "device-count" else False))
            elif isinstance(node, cst.Name) and node.value in self.flags:
                flags.append(node)
        return checks, flags

    def collect_flags(self, module: cst.Module) -> None:
        """Names assigned (anywhere in the module) from an expression with a check, other than a device choice."""
        for _ in range(2):  # a flag made from a flag
            for node in _children(module):
                if isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                        isinstance(node.targets[0].target, cst.Name):
                    checks, flags = self.find(node.value, skip_choices=True)
                    if checks or flags:
                        self.flags.setdefault(node.targets[0].target.value, node.value)

    # --- judging what a check guards ----------------------------------------------------------------------
    def designation(self, node: cst.CSTNode) -> bool:
        """A literal naming a device or a process-group backend, `torch.device(<one>, ...)`, or a choice between
        them (`"cuda" if A else "mps" if B else "cpu"`: the arms of a device choice may be choices themselves)."""
        if isinstance(node, cst.IfExp):
            return self.designation(node.body) and self.designation(node.orelse)
        value = literal_string(node)
        if value is not None:
            return DEVICE_LITERAL.match(value) is not None or value in BACKENDS
        if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
            return DEVICE_LITERAL.match(node.parts[0].value.split(":")[0]) is not None
        if isinstance(node, cst.Call) and "torch.device" in self.resolve(node.func) and node.args:
            return self.designation(node.args[0].value)
        return False

    def device_choice(self, node: cst.CSTNode) -> bool:
        """`A if T else B` whose arms name devices, or move a value to a device against the value itself."""
        if not isinstance(node, cst.IfExp):
            return False
        if self.designation(node.body) and self.designation(node.orelse):
            return True
        return self._move_pair(node.body, node.orelse) or self._move_pair(node.orelse, node.body)

    def choice_statement(self, statement: cst.CSTNode) -> tuple[str, str] | None:
        """("return", "") or ("assign", name) when `statement` is `return <device>` or `name = <device>`."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if isinstance(small, cst.Return) and small.value is not None and self.designation(small.value):
            return "return", ""
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and self.designation(small.value):
            return "assign", small.targets[0].target.value
        return None

    def statement_choice(self, node: cst.If, following: cst.CSTNode | None) -> bool:
        """`if T: return D1` then `return D2`, or `if T: d = D1 else: d = D2`: a device choice in statements."""
        body = list(node.body.body)
        if len(body) != 1 or (first := self.choice_statement(body[0])) is None:
            return False
        if isinstance(node.orelse, cst.Else):
            other = list(node.orelse.body.body)
            return len(other) == 1 and self.choice_statement(other[0]) == first
        return node.orelse is None and first[0] == "return" and following is not None and \
            self.choice_statement(following) == first

    def _move_pair(self, moved: cst.CSTNode, plain: cst.CSTNode) -> bool:
        if isinstance(moved, cst.Call) and isinstance(moved.func, cst.Attribute) and moved.func.attr.value in MOVES:
            receiver = code(moved.func.value)
            if code(plain) == receiver:
                return True
            return isinstance(plain, cst.Call) and isinstance(plain.func, cst.Attribute) and \
                plain.func.attr.value == "cpu" and code(plain.func.value) == receiver
        return False

    def neutral(self, statements: list[cst.BaseStatement]) -> bool:
        """Statements that only move work to the device or keep device bookkeeping."""
        return all(isinstance(s, cst.SimpleStatementLine) and all(self._neutral_small(small) for small in s.body)
                   for s in statements)

    def _neutral_small(self, small: cst.BaseSmallStatement) -> bool:
        if isinstance(small, cst.Pass):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            names = self.resolve(call.func)
            if names & BOOKKEEPING or self._moved_from(call) is not None:
                return True
            printer = names & PRINTERS or (isinstance(call.func, cst.Attribute) and call.func.attr.value in LOG_METHODS)
            return bool(printer) and all(self._reads_only(a.value) for a in call.args)
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if any(name.startswith(("torch.backends.cudnn.", "torch.backends.cuda."))
                   for name in self.resolve(target)):
                return True  # a flag with no effect on what is computed
            value = small.value
            if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and \
                    len(target.elements) == len(value.elements):  # `x, y = x.to(d), y.to(d)`
                return all(self._moved_from(v.value) == code(t.value) for t, v in zip(target.elements, value.elements))
            if self._moved_from(value) == code(target):
                return True
            if isinstance(target, cst.Name) and self.designation(value):
                return True  # `device = "cuda"` over a default: a device choice
            return isinstance(target, cst.Name) and self._reads_only(value) and self._reads_device(value)
        return False

    def _reads_device(self, expr: cst.CSTNode) -> bool:
        """An expression that reads a device fact (`torch.cuda.max_memory_allocated() / 2**20`)."""
        return any(isinstance(n, cst.Call) and self.resolve(n.func) & READERS - BUILTIN_READERS for n in _children(expr))

    def _moved_from(self, node: cst.CSTNode) -> str | None:
        """`x` when `node` moves `x` to a device (`x.cuda()`, `x.pin_memory().to(d, non_blocking=True)`)."""
        moved = False
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in MOVE_CHAIN and not self.resolve(node.func):
            moved = moved or node.func.attr.value in MOVES
            node = node.func.value
        return code(node) if moved else None

    def _reads_only(self, expr: cst.CSTNode) -> bool:
        """An expression whose calls only read device facts or format them."""
        for node in _children(expr):
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value == "format":
                    continue
                if not self.resolve(func) & READERS:
                    return False
        return True

    # --- how a check reads on neuron ----------------------------------------------------------------------
    def value_on_neuron(self, expr: cst.CSTNode, seen: frozenset[str] = frozenset()) -> object:
        """The value of `expr` on neuron when it depends only on checks (CUDA absent), else None."""
        if isinstance(expr, cst.Comparison):
            check = comparison_check(expr)
            if check is not None:
                return check.value
            if len(expr.comparisons) == 1:
                left = self.value_on_neuron(expr.left, seen)
                right = expr.comparisons[0].comparator
                if isinstance(left, int) and not isinstance(left, bool) and isinstance(right, cst.Integer):
                    return _compare(left, expr.comparisons[0].operator, int(right.value))
            return None
        if isinstance(expr, cst.Call):
            if startswith_check(expr) or self.resolve(expr.func) & OTHER_ACCELERATOR_QUERIES:
                return False
            rule_id = self.query(expr.func)
            return None if rule_id is None else (0 if rule_id == "device-count" else False)
        if isinstance(expr, cst.Attribute) and (self.query(expr) or expr.attr.value in OTHER_ACCELERATOR_ATTRIBUTES):
            return False
        if isinstance(expr, cst.Name) and expr.value in self.flags and expr.value not in seen:
            return self.value_on_neuron(self.flags[expr.value], seen | {expr.value})
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            inner = self.value_on_neuron(expr.expression, seen)
            return None if inner is None else not inner
        if isinstance(expr, cst.BooleanOperation):
            values = [self.value_on_neuron(side, seen) for side in (expr.left, expr.right)]
            falsy = [v is not None and not v for v in values]
            truthy = [v is not None and bool(v) for v in values]
            if isinstance(expr.operator, cst.And):
                return False if any(falsy) else (True if all(truthy) else None)
            return True if any(truthy) else (False if all(falsy) else None)
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return expr.value == "True"
        return None


def _compare(left: int, operator: cst.BaseCompOp, right: int) -> bool | None:
    table = {cst.GreaterThan: left > right, cst.GreaterThanEqual: left >= right, cst.LessThan: left < right,
             cst.LessThanEqual: left <= right, cst.Equal: left == right, cst.NotEqual: left != right}
    return table.get(type(operator))
