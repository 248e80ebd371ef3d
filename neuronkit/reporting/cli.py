"""`neuronkit report RUN_DIR [--out DIR]`: render report.html and report.json from a run directory."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the report subcommand's arguments."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a workbook run directory")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where to write report.html and report.json (default: RUN_DIR)")


def run(args: argparse.Namespace) -> int:
    """Write the report, then print the verdict and where the files went."""
    from neuronkit.reporting import report  # deferred: matplotlib and torch load only when a report is made

    paths = report(args.run_dir, args.out)
    verdict = json.loads(paths.json.read_text(encoding="utf-8"))["verdict_label"]
    print(f"verdict: {verdict}\n{paths.html}\n{paths.json}")
    return 0
