"""The part of the port pass about CUDA checks (`guards.py` judges them): a check inside a device choice or a
device guard is rewritten to its torch.accelerator form and the construct reported once; any other check is a
decide finding whose note says which branch runs on neuron and what the other holds (a blocker only the branch
not taken reaches becomes a decision)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from neuronkit.port.cst_util import code, expr, walk
from neuronkit.port.guards import Check, comparison_check
from neuronkit.port.rules import Rule, rule_by_id


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


    # --- checks and what they guard -----------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        checks, flags = self.checks.find(node.test)
        if not checks and not flags:
            return
        orelse = node.orelse.body if isinstance(node.orelse, cst.Else) else None
        neutral = isinstance(node.orelse, (cst.Else, type(None))) and self.checks.neutral(list(node.body.body)) \
            and (orelse is None or self.checks.neutral(list(orelse.body)))  # type: ignore[union-attr]
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

