"""`nki.typing`: the annotations kernels use (`nt.tensor[shape]`, `nt.mutable_tensor`); they only annotate."""

from __future__ import annotations

from typing import Any


class _Annotation:
    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, _: Any) -> _Annotation:
        return self

    def __repr__(self) -> str:
        return f"nki.typing.{self.name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
