"""The part of the port pass about CUDA checks (`guards.py` judges them): a check inside a device choice or a
device guard is rewritten to its torch.accelerator form and the construct reported once; any other check is a
decide finding whose note says which branch runs on neuron and what the other holds (a blocker only the branch
not taken reaches becomes a decision)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from neuronkit.port.cst_util import code, dotted, expr, walk
from neuronkit.port.guards import Check, comparison_check
from neuronkit.port.rules import Rule, rule_by_id


_ANY = object()  # a test with no CUDA check: either branch may run
# What a CUDA call raises without CUDA (AssertionError with a CPU build of torch, RuntimeError with a CUDA
# build), and the handlers that catch either.
CATCHING = frozenset({"Exception", "BaseException", "RuntimeError", "AssertionError"})
EXITS = frozenset({"sys.exit", "os._exit", "exit", "quit"})  # as written


def _catches(handler: cst.ExceptHandler) -> bool:
    """Whether an `except` clause catches what a CUDA call raises without CUDA."""
    if handler.type is None:
        return True
    types = [e.value for e in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    return any((dotted(t) or "").rsplit(".", 1)[-1] in CATCHING for t in types)


def _leaves(block: cst.BaseSuite) -> bool:
    """Whether a block's last statement leaves it: return, raise, continue, break, or sys.exit() / exit()."""
    body = list(block.body)
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        small = last.body[-1] if last.body else None
    elif isinstance(last, cst.BaseSmallStatement):  # `if CHECK: return` on one line
        small = last
    else:
        return False
    if isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return True
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and dotted(small.value.func) in EXITS


@dataclass
class _Guard:
    """A check in an `if` test that stays as it reads without CUDA: where each branch is, for the note."""

    line: int
    taken: tuple[int, int] | None  # the branch neuron takes (lines), None when it cannot be told
    untaken: tuple[int, int] | None
    value: object
    findings: list[int] = field(default_factory=list)


class GuardRewrites:
    """Mixed into PortMatcher (which provides `_add`, `_line`, `checks`, `findings` and the metadata)."""

    def _init_guards(self) -> None:
        self._rewrite_checks: set[int] = set()  # check nodes inside a guard that is rewritten
        self._folded: set[int] = set()  # nodes whose findings a guard rewrite's own finding stands for
        self._check_guard: dict[int, _Guard] = {}
        self._guards: list[_Guard] = []

    def _query(self, original: cst.BaseExpression, updated: cst.BaseExpression, rule: Rule,
               name: str) -> cst.BaseExpression:
        """A CUDA query: rewritten inside a guard that is, else a decide finding with its note."""
        if id(original) in self._rewrite_checks:
            assert rule.target
            return expr(rule.target) if "." in rule.target else updated.with_changes(attr=cst.Name(rule.target))  # type: ignore[call-arg]
        self._check_found(original, rule, name)
        return updated

    def _check_found(self, node: cst.CSTNode, rule: Rule, detail: str) -> None:
        guard = self._check_guard.get(id(node))
        if guard is None:
            self._add(node, rule, detail, False, note=self._check_note(node))
        else:
            guard.findings.append(self._add(node, rule, detail, False))

    def _check_note(self, node: cst.CSTNode) -> str | None:
        """How a check outside an `if` test reads on neuron."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        call = parent if isinstance(parent, cst.Call) and parent.func is node else node
        reading = self.checks.value_on_neuron(call)
        return None if reading is None else f"reads {reading!r} on neuron, as without CUDA or XLA"


    # --- what neuron reaches ------------------------------------------------------------------------------
    def _reached_on_neuron(self, node: cst.CSTNode) -> bool:
        """Whether the script, rewritten, surely reaches `node` on neuron, as far as CUDA checks go: no check on
        the way (`if`/`elif`/`else`, `A if CHECK else B`, `CHECK and ...`) leads elsewhere there or may (one whose
        value cannot be told), no `try` around it catches what a CUDA call raises, and no earlier `if CHECK:`
        in an enclosing block returns (raises, exits, breaks, continues) first. A check rewritten to its
        torch.accelerator form reads True. Other conditions (an argument, a function called or not) count as
        reaching it."""
        child, parent = node, self.get_metadata(ParentNodeProvider, node, None)
        while parent is not None:
            if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
                taken = self._taken(parent.test)
                if taken is not _ANY and taken != (child is parent.body):
                    return False
            elif isinstance(parent, cst.BooleanOperation) and child is parent.right:
                left = self._taken(parent.left)
                if left is not _ANY and left != isinstance(parent.operator, cst.And):
                    return False  # `CHECK and call()` with CHECK false, `CHECK or call()` with CHECK true, or unknown
            elif isinstance(parent, cst.Try) and child is parent.body and any(map(_catches, parent.handlers)):
                return False
            elif isinstance(parent, (cst.IndentedBlock, cst.Module)) and self._left_before(parent, child):
                return False
            child, parent = parent, self.get_metadata(ParentNodeProvider, parent, None)
        return True

    def _taken(self, test: cst.BaseExpression) -> object:
        """How a test reads on neuron: _ANY when it holds no CUDA check, True or False, None when unknown."""
        checks, flags = self.checks.find(test)
        if not checks and not flags:
            return _ANY
        if any(id(c.node) in self._rewrite_checks for c in checks):
            return True
        value = self.checks.value_on_neuron(test)
        return None if value is None else bool(value)

    def _left_before(self, block: cst.IndentedBlock | cst.Module, child: cst.CSTNode) -> bool:
        """Whether a statement before `child` in `block` is `if CHECK:` whose branch neuron takes (or may) ends
        the block's run: return, raise, continue, break, sys.exit()."""
        for statement in block.body:
            if statement is child:
                return False
            if isinstance(statement, cst.If) and (taken := self._taken(statement.test)) is not _ANY:
                other = statement.orelse.body if isinstance(statement.orelse, cst.Else) else None
                branches = [statement.body, other] if taken is None else [statement.body if taken else other]
                if any(branch is not None and _leaves(branch) for branch in branches):
                    return True
        return False

    # --- checks and what they guard -----------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        checks, flags = self.checks.find(node.test)
        if not checks and not flags:
            return
        orelse = node.orelse.body if isinstance(node.orelse, cst.Else) else None
        neutral = isinstance(node.orelse, (cst.Else, type(None))) and self.checks.neutral(list(node.body.body)) \
            and (orelse is None or self.checks.neutral(list(orelse.body)))  # type: ignore[union-attr]
        # a call that raises on neuron even rewritten keeps its guard: rewritten, a branch might run it there
        neutral = neutral and not any(map(self._fails_on_neuron, walk(node.body))) \
            and not (orelse is not None and any(map(self._fails_on_neuron, walk(orelse))))
        if not flags and (neutral or self.checks.statement_choice(node, self._following(node))):
            self._add(node.test, rule_by_id("device-guard"), code(node.test), True)
            self._rewrite_guard(node.test, checks)
            return
        value = self.checks.value_on_neuron(node.test)
        body = self._lines(node.body)
        other = self._lines(node.orelse) if node.orelse is not None else None
        taken, untaken = (body, other) if value else (other, body)
        guard = _Guard(self._line(node), taken if value is not None else None,
                       untaken if value is not None else None, value)
        self._guards.append(guard)
        for check in checks:
            self._check_guard[id(check.node)] = guard
        for flag in flags:
            self._check_guard[id(flag)] = guard
        if flags and not checks:  # `if use_cuda:`: reported here, the flag's definition says why
            guard.findings.append(self._add(node.test, rule_by_id("cuda-check"), code(node.test), False))

    def _following(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The statement after `node` in its block, if any."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if not isinstance(parent, (cst.IndentedBlock, cst.Module)):
            return None  # an elif, or an if on one line
        body = list(parent.body)
        index = next((i for i, s in enumerate(body) if s is node), None)
        return body[index + 1] if index is not None and index + 1 < len(body) else None

    def visit_IfExp(self, node: cst.IfExp) -> None:
        checks, flags = self.checks.find(node.test)
        if checks and not flags and self.checks.device_choice(node):
            self._rewrite_guard(node.test, checks)
            self._add(node, rule_by_id("device-choice"), code(node), True)
            self._folded.update(id(n) for n in walk(node))

    def _rewrite_guard(self, test: cst.CSTNode, checks: list[Check]) -> None:
        self._rewrite_checks.update(id(c.node) for c in checks)
        self._folded.update(id(n) for n in walk(test))

    def _lines(self, block: cst.CSTNode) -> tuple[int, int]:
        position = self.get_metadata(PositionProvider, block)
        return position.start.line + isinstance(block, cst.Else), position.end.line

    def _note_guards(self) -> None:
        """Each kept check in an `if` says which branch runs on neuron and what the other holds; a blocker only
        the branch not taken reaches is a decision, not a blocker."""
        for guard in self._guards:
            inside = []
            if guard.untaken:
                first, last = guard.untaken
                for i, f in enumerate(self.findings):
                    if first <= f.line <= last and i not in guard.findings:
                        if f.category == "blocker":
                            self.findings[i] = replace(f, category="decide", note=(
                                f"only in the branch of line {guard.line} that neuron does not take"))
                        inside.append(f"line {f.line} [{f.rule.id}]" + (" blocker" if f.rule.category == "blocker" else ""))
            note = self._branches(guard, inside)
            for i in guard.findings:
                if i >= 0:
                    self.findings[i] = replace(self.findings[i], note=note)

    @staticmethod
    def _branches(guard: _Guard, inside: list[str]) -> str:
        if guard.value is None:
            return "which branch runs on neuron depends on values the check is combined with: read both branches"

        def span(lines: tuple[int, int], one: str, many: str) -> str:
            return f"line {lines[0]} {one}" if lines[0] == lines[1] else f"lines {lines[0]}-{lines[1]} {many}"
        note = f"reads {guard.value!r} on neuron, as without CUDA or XLA: "
        note += f"{span(guard.taken, 'runs', 'run')}, " if guard.taken else ""
        note += span(guard.untaken, "does not run", "do not run") if guard.untaken else "nothing is skipped"
        if inside:
            note += " (they hold " + ", ".join(inside[:6]) + (", ..." if len(inside) > 6 else "") + ")"
        return note

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        check = comparison_check(original)
        if check and not self._import_depth and id(original) not in self._rewrite_checks:
            self._check_found(original, rule_by_id(check.rule_id), code(original))
        return updated

