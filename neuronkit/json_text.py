"""One way the library's documents (the audit, the plan, the check report) become JSON text and files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def json_text(data: dict[str, Any], path: str | Path | None = None, **options: Any) -> str:
    """`data` as indented JSON text (`options`: more `json.dumps` keywords); also written to `path`, with a
    final newline, when given."""
    text = json.dumps(data, indent=2, **options)
    if path is not None:
        Path(path).write_text(text + "\n", encoding="utf-8")
    return text
