"""Small libcst helpers `neuronkit port`'s passes share."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst


def code(node: cst.CSTNode) -> str:
    """A node's source text."""
    return cst.Module([]).code_for_node(node)


def expr(text: str) -> cst.BaseExpression:
    """The expression node of `text`."""
    return cst.parse_expression(text)


def dotted(node: cst.BaseExpression | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `node`, itself included."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def literal_string(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-bytes) string literal, else None."""
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None
