"""`neuronkit compat`: the simulator's whole compatibility table in AWS's vocabulary (Y Native / Host-only /
Needs a process group; CPU_FALLBACK with the ATen op and dtypes; N; unknown with its reason), as Markdown to
diff against the table AWS publishes for its release, as JSON, or as plain text.

Exit status: 0 written, 2 bad input (an unknown namespace or status, an unwritable output path).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from neuronkit.compat.vocabulary import STATUSES
from neuronkit.errors import NeuronkitInputError


def configure_parser(parser: argparse.ArgumentParser) -> None:
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="Markdown, one table per namespace (the public table's columns)")
    form.add_argument("--json", action="store_true", help="JSON: the notes and one object per API")
    parser.add_argument("--namespace", action="append", metavar="NS",
                        help="only this namespace (torch, torch.Tensor, torch.nn.functional, torch.linalg, torch.fft, "
                             "torch.special, torch.distributed); repeatable")
    parser.add_argument("--status", action="append", metavar="STATUS",
                        help=f"only rows of this status ({', '.join(STATUSES)}); repeatable")
    parser.add_argument("--out", metavar="FILE", help="write to FILE instead of standard output")


def run(args: argparse.Namespace) -> int:
    statuses = set(args.status or STATUSES)
    unknown = sorted(statuses - set(STATUSES))
    if unknown:
        raise NeuronkitInputError(f"unknown --status {', '.join(unknown)}; known: {', '.join(STATUSES)}")
    out = Path(args.out) if args.out else None
    if out is not None and not out.parent.is_dir():
        raise NeuronkitInputError(f"--out: directory {out.parent} does not exist")
    from neuronkit.compat import table  # after validating arguments: builds the table from torch's API lists

    rows = table.whole_table()
    namespaces = {row.namespace for row in rows}
    wanted = set(args.namespace or namespaces)
    if wanted - namespaces:
        raise NeuronkitInputError(f"unknown --namespace {', '.join(sorted(wanted - namespaces))}; "
                                  f"known: {', '.join(sorted(namespaces))}")
    rows = [row for row in rows if row.namespace in wanted and row.status in statuses]
    notes = table.table_notes()
    if args.markdown:
        document = table.markdown(rows, notes)
    elif args.json:
        document = json.dumps({"notes": notes, "apis": [row.to_dict() for row in rows]}, indent=2) + "\n"
    else:
        document = table.text(rows) + "\n"
    if out is None:
        print(document, end="")
    else:
        out.write_text(document, encoding="utf-8")
        print(f"{len(rows)} APIs written to {out}")
    return 0
