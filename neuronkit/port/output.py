"""What `neuronkit port` prints: the findings as a terminal table or JSON, and the counts by category."""

from __future__ import annotations

import shutil
import textwrap
from collections import Counter
from collections.abc import Sequence
from typing import Any

from neuronkit.port.matchers import Finding
from neuronkit.port.rules import CATEGORIES
from neuronkit.port.scan import FileScan, NotScanned


def finding_record(f: Finding) -> dict[str, Any]:
    """One finding as JSON."""
    return {"path": f.path, "line": f.line, "col": f.col, "category": f.category, "rule": f.rule.id,
            "code": f.code, "match": f.detail, "remedy": f.rule.remedy, "source": f.rule.source,
            "accelerator": f.rule.accelerator, "fixed_by_write": f.fixed, "note": f.note}


def counts(scans: list[FileScan]) -> dict[str, int]:
    """Findings per category, plus how many rewrites `--write` applies."""
    c = Counter(f.category for s in scans for f in s.findings)
    out = {category: c.get(category, 0) for category in CATEGORIES}
    out["fixed_by_write"] = sum(f.fixed for s in scans for f in s.findings)
    return out


def verdict(scans: list[FileScan], not_scanned: Sequence[NotScanned] = ()) -> str:
    """"blocked" when a blocker is found or the script imports a file that is not valid Python (it cannot run as
    is), else "ready" (a file not scanned that the script does not import does not block)."""
    return "blocked" if counts(scans)["blocker"] or any(n.breaks_script for n in not_scanned) else "ready"


def not_scanned_record(n: NotScanned) -> dict[str, Any]:
    """A file not scanned, as JSON."""
    return {"path": str(n.path), "line": n.line, "col": n.col, "reason": n.reason, "valid_python": n.valid,
            "imported_by": str(n.imported_by) if n.imported_by is not None else None,
            "breaks_script": n.breaks_script, "message": str(n)}


def scan_record(scans: list[FileScan], not_scanned: Sequence[NotScanned] = ()) -> dict[str, Any]:
    """The scan as JSON: files, the files not scanned, findings, counts, verdict."""
    return {"files": [str(s.path) for s in scans], "not_scanned": [not_scanned_record(n) for n in not_scanned],
            "verdict": verdict(scans, not_scanned), "counts": counts(scans),
            "findings": [finding_record(f) for s in scans for f in s.findings]}


def summary_line(scans: list[FileScan], not_scanned: Sequence[NotScanned] = ()) -> str:
    """`3 files: 12 findings (8 rewrite, 7 fixed by --write; 3 decide; 1 blocker) -> blocked`; with no blocker,
    `-> ready`, or `-> ready after 1 change by hand` while a rewrite `--write` cannot make is left (the exit
    status stays 0: only blockers block). Files that could not be read as Python are counted after the findings
    (`; 1 file not scanned`), with how many of them the script imports and cannot run without (those block)."""
    c = counts(scans)
    total = sum(c[k] for k in CATEGORIES)
    files = f"{len(scans)} file{'s' * (len(scans) != 1)}"
    state = verdict(scans, not_scanned)
    by_hand = c["rewrite"] - c["fixed_by_write"]
    if state == "ready" and by_hand:
        state += f" after {by_hand} change{'s' * (by_hand != 1)} by hand"
    skipped = ""
    if not_scanned:
        skipped = f"; {len(not_scanned)} file{'s' * (len(not_scanned) != 1)} not scanned"
        if breaking := sum(n.breaks_script for n in not_scanned):
            skipped += f" ({breaking} imported by the script and not valid Python)"
    return (f"{files}: {total} finding{'s' * (total != 1)} ({c['rewrite']} rewrite, "
            f"{c['fixed_by_write']} fixed by --write; {c['decide']} decide; {c['blocker']} blocker"
            f"{'s' * (c['blocker'] != 1)}){skipped} -> {state}")


def table(scans: list[FileScan], width: int | None = None, not_scanned: Sequence[NotScanned] = ()) -> str:
    """The findings, one block per finding: location, category, rule and code, then remedy, source and the
    device-agnostic form, wrapped to the terminal; then one line per file not scanned, and the summary line."""
    width = width or max(80, shutil.get_terminal_size((120, 24)).columns)
    lines = []
    for s in scans:
        for f in s.findings:
            mark = " (fixed by --write)" if f.fixed else (" (by hand)" if f.category == "rewrite" else "")
            lines.append(f"{f.path}:{f.line}:{f.col}  {f.category.upper()}{mark}  [{f.rule.id}]  {f.code}")
            details = [f"-> {f.rule.remedy}"] + ([f"here: {f.note}"] if f.note else [])
            for d in details:
                lines.extend(textwrap.wrap(d, width=width, initial_indent="    ", subsequent_indent="      ",
                                           break_on_hyphens=False, break_long_words=False))
            # one source a line, never broken (a URL may run past the width)
            lines += [f"    {'source:' if i == 0 else '       '} {s}" for i, s in enumerate(f.rule.source.split("; "))]
            if f.rule.accelerator:
                lines.extend(textwrap.wrap(f"device-agnostic: {f.rule.accelerator}", width=width, initial_indent="    ",
                                           subsequent_indent="      ", break_on_hyphens=False, break_long_words=False))
    lines.extend(str(n) for n in not_scanned)
    lines.append(summary_line(scans, not_scanned))
    return "\n".join(lines)
