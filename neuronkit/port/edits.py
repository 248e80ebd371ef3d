"""The edits `neuronkit port` makes to a module beyond replacing an expression: a statement replaced by a
template or removed (its line kept as a comment, so the lines after it keep their numbers), and the
native helpers (neuronkit/port/native_helpers.py) a template calls, copied in after the imports."""

from __future__ import annotations

import difflib
import inspect
import re
from functools import lru_cache

import libcst as cst

from neuronkit.port import native_helpers

REMOVED = "__neuronkit_port_removed__"
MARK = "(neuronkit port)"  # ends the comment a removed statement leaves
HELPERS_HEADER = "# Native forms of the torch_xla calls this file made (added by `neuronkit port`):"


# --- templates --------------------------------------------------------------------------------------------------
def fill(template: str, call: cst.Call, module: cst.Module, ignore: tuple[str, ...] = (),
         extra: dict[str, str] | None = None, parameters: tuple[str, ...] = ()) -> str | None:
    """`template` with `{0}`, `{1}` (the call's positional arguments, or the keywords naming `parameters` at
    those positions), `{args}` (every argument as written, less the keywords in `ignore`) and `extra`'s fields
    filled in; None when the call passes a keyword the template cannot carry (neither in `ignore` nor under
    `{args}`) or a `*args`."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    named = {a.keyword.value: a for a in call.args if a.keyword is not None}
    for name in parameters[len(positional):]:
        if name not in named:
            break
        positional.append(named[name])
    taken = {a.keyword.value for a in positional if a.keyword is not None}
    keywords = [a for a in call.args if a.keyword is not None and a.keyword.value not in ignore + tuple(taken)]
    if any(a.star for a in call.args) and "{args}" not in template:
        return None
    if keywords and "{args}" not in template:
        return None
    written = [a for a in call.args if a.keyword is None or a.keyword.value not in ignore]
    fields = {str(i): _operand(module.code_for_node(a.value), a.value, template, str(i))
              for i, a in enumerate(positional)}
    fields["args"] = ", ".join(module.code_for_node(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
                               for a in written)
    fields.update(extra or {})
    try:
        return re.sub(r"\{(\w+)\}", lambda m: fields[m.group(1)], template)
    except KeyError:
        return None


# Expressions that bind less tightly than a call: `{0}()` of `lambda: f()` must be `(lambda: f())()`.
_LOOSE = (cst.Lambda, cst.IfExp, cst.BooleanOperation, cst.Comparison, cst.BinaryOperation, cst.UnaryOperation,
          cst.NamedExpr, cst.Await, cst.Yield)


def _operand(text: str, node: cst.BaseExpression, template: str, field: str) -> str:
    """`text` (the code of `node`), in parentheses where `template` calls, subscripts or takes an attribute of the
    field and `node` binds less tightly than that (a lambda, `a if b else c`, `a + b`)."""
    if not isinstance(node, _LOOSE) or node.lpar:
        return text
    if re.search(r"\{" + field + r"\}\s*[(.\[]", template) is None:
        return text
    return f"({text})"


def replace_statement(line: cst.SimpleStatementLine, text: str, comment: str) -> cst.BaseStatement:
    """The statement line `line` replaced by `text` (one line; "" removes it, leaving `comment`), keeping the
    comments around it."""
    if not text:
        return line.with_changes(body=[cst.Expr(cst.Name(REMOVED))],
                                 trailing_whitespace=cst.TrailingWhitespace(comment=cst.Comment(comment)))
    new = cst.parse_statement(text + "\n")
    if isinstance(new, cst.SimpleStatementLine):
        return new.with_changes(leading_lines=line.leading_lines, trailing_whitespace=line.trailing_whitespace)
    assert isinstance(new, cst.If) and isinstance(new.body, cst.SimpleStatementSuite)
    return new.with_changes(leading_lines=line.leading_lines,
                            body=new.body.with_changes(trailing_whitespace=line.trailing_whitespace))


def _is_removed(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
        isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.Name) and \
        statement.body[0].value.value == REMOVED


def _comment_of(statement: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    return [*statement.leading_lines, cst.EmptyLine(indent=True, comment=statement.trailing_whitespace.comment)]


def _sweep(body: list[cst.BaseStatement], footer: list[cst.EmptyLine]) -> tuple[list, list[cst.EmptyLine]] | None:
    """`body` without its removed statements, each left as a comment line on the next statement (or the
    footer); None when nothing is removed. A block left empty gets a `pass` carrying the comment."""
    if not any(_is_removed(s) for s in body):
        return None
    kept: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    for statement in body:
        if _is_removed(statement):
            carried.extend(_comment_of(statement))  # type: ignore[arg-type]
            continue
        if carried:
            statement = statement.with_changes(leading_lines=[*carried, *statement.leading_lines])
            carried = []
        kept.append(statement)
    if not kept:
        last = carried.pop()
        kept.append(cst.SimpleStatementLine([cst.Pass()], leading_lines=carried,
                                            trailing_whitespace=cst.TrailingWhitespace(comment=last.comment)))
        carried = []
    return kept, [*carried, *footer]


class _Sweeper(cst.CSTTransformer):
    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        swept = _sweep(list(updated.body), list(updated.footer))
        return updated if swept is None else updated.with_changes(body=swept[0], footer=swept[1])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        swept = _sweep(list(updated.body), list(updated.footer))
        return updated if swept is None else updated.with_changes(body=swept[0], footer=swept[1])


def sweep_removed(module: cst.Module) -> cst.Module:
    """Take out the statements `replace_statement` removed."""
    return module.visit(_Sweeper())


def line_map(kept: str, added: str) -> tuple[list[int], set[int]]:
    """Lines of `added` (a module with the helpers inserted) to lines of `kept` (the same module before, whose
    lines are the original's one for one): each line's original line (an added line: the one before it), and
    the added lines. `insert_helpers` only adds lines, and blank ones."""
    before, after = kept.splitlines(), added.splitlines()
    mapping, new = [0] * len(after), set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        paired = i2 - i1 if tag in ("equal", "replace") else 0
        for offset, j in enumerate(range(j1, j2)):
            if offset < paired:
                mapping[j] = i1 + offset + 1
            else:
                mapping[j] = max(i1, 1)
                new.add(j + 1)
    return mapping, new


# --- native helpers ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _helper_definitions() -> dict[str, cst.BaseCompoundStatement]:
    module = cst.parse_module(inspect.getsource(native_helpers))
    return {s.name.value: s.with_changes(leading_lines=[]) for s in module.body
            if isinstance(s, (cst.FunctionDef, cst.ClassDef))}


def _needed(names: set[str]) -> list[str]:
    """`names` and the helpers they use, in native_helpers.py's order."""
    definitions = _helper_definitions()
    wanted = set(names)
    while True:
        used = {n for name in wanted for n in re.findall(r"\w+", cst.Module([definitions[name]]).code)} & set(definitions)
        if used <= wanted:
            break
        wanted |= used
    return [name for name in definitions if name in wanted]


def insert_helpers(module: cst.Module, names: set[str]) -> cst.Module:
    """`module` with the helpers `names` (and those they use) defined after its leading imports."""
    if not names:
        return module
    body = list(module.body)
    at = 0
    for index, statement in enumerate(body):
        if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) or
                (index == 0 and isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)))
                for s in statement.body):
            at = index + 1
            continue
        break
    definitions = _helper_definitions()
    blank = cst.EmptyLine()
    added: list[cst.BaseStatement] = []
    if not any(isinstance(s, cst.Import) and any(a.name.value == "torch" for a in s.names if isinstance(a.name, cst.Name))
               for line in body[:at] if isinstance(line, cst.SimpleStatementLine) for s in line.body):
        added.append(cst.parse_statement("import torch\n"))
    # the comments left by removed imports stay where the imports were, above the helpers
    moved: list[cst.EmptyLine] = []
    if at < len(body):
        leading = list(body[at].leading_lines)
        moved = [line for line in leading if line.comment is not None and MARK in line.comment.value]
        rest = [line for line in leading if line not in moved]
        blanks = next((i for i, line in enumerate(rest) if line.comment is not None), len(rest))
        body[at] = body[at].with_changes(leading_lines=[blank] * max(2, blanks) + rest[blanks:])
    for i, name in enumerate(_needed(names)):
        leading = [*moved, blank, blank, cst.EmptyLine(comment=cst.Comment(HELPERS_HEADER))] if i == 0 else [blank, blank]
        added.append(definitions[name].with_changes(leading_lines=leading))
    return module.with_changes(body=[*body[:at], *added, *body[at:]])
