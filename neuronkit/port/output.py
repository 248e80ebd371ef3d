"""What `neuronkit port` prints: the findings as a terminal table or JSON, and the counts by category."""

from __future__ import annotations

import shutil
import textwrap
from collections import Counter
from typing import Any

from neuronkit.port.matchers import Finding
from neuronkit.port.rules import CATEGORIES
from neuronkit.port.scan import FileScan


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


def verdict(scans: list[FileScan]) -> str:
    """"blocked" when a blocker is found, else "ready"."""
    return "blocked" if counts(scans)["blocker"] else "ready"


def scan_record(scans: list[FileScan]) -> dict[str, Any]:
    """The scan as JSON: files, findings, counts, verdict."""
    return {"files": [str(s.path) for s in scans], "verdict": verdict(scans), "counts": counts(scans),
            "findings": [finding_record(f) for s in scans for f in s.findings]}


def summary_line(scans: list[FileScan]) -> str:
    """`3 files: 12 findings (8 rewrite, 7 fixed by --write; 3 decide; 1 blocker) -> blocked`; with no blocker,
    `-> ready`, or `-> ready after 1 change by hand` while a rewrite `--write` cannot make is left (the exit
    status stays 0: only blockers block)."""
    c = counts(scans)
    total = sum(c[k] for k in CATEGORIES)
    files = f"{len(scans)} file{'s' * (len(scans) != 1)}"
    state = verdict(scans)
    by_hand = c["rewrite"] - c["fixed_by_write"]
    if state == "ready" and by_hand:
        state += f" after {by_hand} change{'s' * (by_hand != 1)} by hand"
    return (f"{files}: {total} finding{'s' * (total != 1)} ({c['rewrite']} rewrite, "
            f"{c['fixed_by_write']} fixed by --write; {c['decide']} decide; {c['blocker']} blocker"
            f"{'s' * (c['blocker'] != 1)}) -> {state}")


def table(scans: list[FileScan], width: int | None = None) -> str:
    """The findings, one block per finding: location, category, rule and code, then remedy, source and the
    device-agnostic form, wrapped to the terminal."""
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
    lines.append(summary_line(scans))
    return "\n".join(lines)
