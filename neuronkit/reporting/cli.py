"""`neuronkit report RUN_DIR [--out DIR] [--fail-on CATEGORY,...]`: render report.html and report.json from a
run directory. Exit 0 ready, 1 blocked or incomplete or a `--fail-on` finding in the model's path, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the report subcommand's arguments."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a workbook run directory")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where to write report.html and report.json (default: RUN_DIR)")
    add_fail_on(parser)


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    """`--fail-on`, shared by `run` and `report`."""
    parser.add_argument("--fail-on", metavar="CATEGORY[,...]", default="",
                        help="exit 1 when the model's path has findings of these categories (e.g. cpu_fallback: "
                             "fallbacks only generate()'s decoding loop makes do not count)")


def exit_code(data: dict, fail_on: list[str]) -> int:
    """0 for report.json's ready verdict with no `--fail-on` finding in the model's path, else 1 (naming the
    categories). A CPU fallback only `generate()`'s decoding loop makes is not in the model's path."""
    failing = sorted({f["category"] for f in data["blockers"] + data["warnings"]
                      if f["category"] in fail_on and f.get("phases") != ["generate"]})
    if failing:
        print(f"neuronkit: findings in --fail-on categories in the model's path: {', '.join(failing)}",
              file=sys.stderr)
    return 0 if data["verdict"].startswith("ready") and not failing else 1


def run(args: argparse.Namespace) -> int:
    """Write the report, then print the verdict and where the files went."""
    from neuronkit.policy import fail_on_categories  # deferred, with torch: only when a report is made
    from neuronkit.reporting import report

    fail_on = fail_on_categories(args.fail_on)
    paths = report(args.run_dir, args.out)
    data = json.loads(paths.json.read_text(encoding="utf-8"))
    print(f"verdict: {data['verdict_label']}\n{paths.html}\n{paths.json}")
    return exit_code(data, fail_on)
