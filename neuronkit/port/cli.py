"""`neuronkit port SCRIPT.py [DIR...]`: find the CUDA and the PyTorch/XLA in a training script and the local
modules it imports, say what each use takes on Trainium, rewrite what keeps the script's behaviour, and
(`--run`) run the rewritten project on the simulated device.

Exit status: 0 ready (decide findings allowed; rewrites left by hand are counted in the summary line, "ready
after N changes by hand"), 1 blockers found, or the script imports a local module that is not valid Python (the
import raises SyntaxError, so the script cannot run as is), or the run failed, 2 bad input (SCRIPT itself not
parsing is one line naming it).

A file that cannot be read as Python does not stop the scan: the other files are scanned and reported as usual,
and each such file is one line of the table (`path:line:col: not valid Python (reason), not scanned`), counted
in the summary line and listed under "not_scanned" in the JSON. One the script imports blocks, as above; one it
does not import (a stray Python 2 file in a folder scanned) does not, nor does one Python compiles but libcst
cannot parse (newer syntax), though what it does on CUDA is then not known. The files named are only read:
`--write OUT` writes the rewritten copy of the files scanned.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from neuronkit.errors import NeuronkitInputError, positive_int_problem
from neuronkit.port.output import scan_record, summary_line, table
from neuronkit.port.run import TIMEOUT_GRACE
from neuronkit.port.scan import FileScan, scan_project


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="SCRIPT",
                        help="the training script, then folders its local modules are imported from (or other "
                             "files); a folder first: every *.py under the paths named")
    parser.add_argument("--json", metavar="OUT", help="write the findings (and the run) as JSON to OUT ('-' for stdout)")
    parser.add_argument("--diff", action="store_true", help="print a unified diff of the rewrite fixes")
    parser.add_argument("--write", metavar="OUT",
                        help="write the rewritten copy to OUT (a file for one script, else a directory)")
    parser.add_argument("--run", action="store_true",
                        help="run the rewritten SCRIPT on the simulated device; arguments for it follow '--'")
    parser.add_argument("--steps", type=int, default=20, metavar="N",
                        help="with --run: stop after N optimizer steps (default 20)")
    parser.add_argument("--nproc", type=int, metavar="K",
                        help="with --run: K processes under torchrun (1 is one plain process unless the script calls "
                             "init_process_group; default: 2 under torchrun when it does, else 1; a script that "
                             "spawns its own processes starts as many as it asks)")
    parser.add_argument("--timeout", type=float, default=600, metavar="S",
                        help="with --run: end the run after S seconds (default 600): SIGTERM, then SIGKILL for what is "
                             f"still running {TIMEOUT_GRACE} s later")
    parser.epilog = "with --run, everything after '--' is the script's own arguments: " \
                    "neuronkit port train.py --run --steps 20 -- --model DIR --lr 1e-4"
    _split_script_args(parser)


def _split_script_args(parser: argparse.ArgumentParser) -> None:
    """Everything after the first `--` is the script's own arguments (`args.script_args`), never a path."""
    parse = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):  # type: ignore[no-untyped-def]
        args = list(sys.argv[1:] if args is None else args)
        cut = args.index("--") if "--" in args else len(args)
        namespace, extra = parse(args[:cut], namespace)
        namespace.script_args = args[cut + 1:]
        return namespace, extra

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> int:
    for name in ("steps", "nproc"):
        if getattr(args, name) is not None and (problem := positive_int_problem(f"--{name}", getattr(args, name))):
            raise NeuronkitInputError(problem)
    if not args.timeout > 0:  # 0, negative, nan: the run would time out at once
        raise NeuronkitInputError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.script_args and not args.run:
        raise NeuronkitInputError("arguments after '--' are for the script, and only with --run")
    if args.run and not Path(args.paths[0]).is_file():
        raise NeuronkitInputError("--run runs a script: name the .py file first (then the folders it imports from)")
    project = scan_project(args.paths)
    scans, not_scanned = project.scans, project.not_scanned
    if args.run:
        from neuronkit.port.run import plan_processes
        plan_processes(project, args.nproc)  # bad input (--nproc for a script that spawns) before anything runs
    to_stdout = args.json == "-"
    if args.diff:
        print("".join(s.diff() for s in scans), end="")
        print("\n".join([*map(str, not_scanned), summary_line(scans, not_scanned)]), file=sys.stderr)
    elif not to_stdout:
        print(table(scans, not_scanned=not_scanned))
    if args.write:
        folder = Path(args.paths[0]).is_dir() or len(scans) + len(not_scanned) > 1  # a copy of several files
        for target in write_copies(scans, Path(args.write), folder):
            print(f"rewritten copy written to {target}", file=sys.stderr)
        for n in not_scanned:
            print(f"no rewritten copy of {n.path}: not scanned", file=sys.stderr)
    reasons = []
    if any(f.category == "blocker" for s in scans for f in s.findings):
        reasons.append("blocker findings")
    if any(n.breaks_script for n in not_scanned):
        reasons.append("the script imports a file that is not valid Python")
    blocked = bool(reasons)
    doc = scan_record(scans, not_scanned)
    status = 1 if blocked else 0
    if args.run:
        from neuronkit.port.run import run_script, run_summary
        result = run_script(project, steps=args.steps, nproc=args.nproc, script_args=args.script_args,
                            timeout=args.timeout, output=sys.stderr if to_stdout else None)
        print(run_summary(result), file=sys.stderr if to_stdout else sys.stdout)
        doc["run"] = result.record()
        status = 1 if blocked or not result.ok else 0
    elif blocked:
        print(f"neuronkit port: blocked: {' and '.join(reasons)} (see above)", file=sys.stderr)
    if to_stdout:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    elif args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"findings JSON written to {args.json}", file=sys.stderr)
    return status


def write_copies(scans: list[FileScan], out: Path, folder: bool = False) -> list[Path]:
    """Write each rewritten file: to `out` itself for one file (unless `out` is a directory, or `folder`: the
    copy of a folder, or of a project with files not scanned), else under `out` by path relative to the files'
    common folder. Refuses to overwrite a file it scanned."""
    if not scans:
        return []
    originals = {s.path.resolve() for s in scans}
    if len(scans) == 1 and not folder and not out.is_dir():
        targets = [out]
    else:
        root = Path(os.path.commonpath([s.path.resolve().parent for s in scans]))
        targets = [out / s.path.resolve().relative_to(root) for s in scans]
    clash = [t for t in targets if t.resolve() in originals]
    if clash:
        raise NeuronkitInputError(f"--write {out}: would overwrite {clash[0]}, a file being ported; "
                                  "choose another path (the original is never modified)")
    for scan, target in zip(scans, targets):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(scan.rewritten, encoding="utf-8")
    return targets
