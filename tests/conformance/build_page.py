"""Render docs/fidelity.md: every modelled behaviour with its source, and the known differences.

The page is generated from four places, so it cannot drift from what the simulator does: the verdict of
every overload (neuronkit/data/op_verdicts.json, generated from S) next to the simulator's, the rules of
neuronkit/data/op_support.toml (each with its evidence), the conformance tests in this folder (each test's
docstring cites its source), and known_differences.toml. `python tests/conformance/build_page.py`
rewrites the page; tests/conformance/test_page.py fails when it is out of date.
"""

from __future__ import annotations

import ast
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PAGE = ROOT / "docs" / "fidelity.md"
SAMPLED_SHARE = 0.03  # tests/conformance/opinfo.py's sampled run (kept here: the page renders without torch)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _policy_rows(table: dict) -> list[str]:
    rows = ["| rule | documented as unsupported | what the device does | source |", "|---|---|---|---|"]
    for section in ("views", "dtypes", "autocast"):
        rows.append(f"| `[{section}]` | | | {_cell(table[section]['source'])} |")
    for entry in table.get("gap", []):
        rows.append(f"| `{entry['category']}`: {_cell(entry['feature'])} | {_cell(entry['documented'])} | "
                    f"{entry['runtime']} | {_cell(entry['runtime_source'])} |")
    for entry in table.get("finding", []):
        rows.append(f"| `{entry['category']}`: {_cell(entry['feature'])} | | {entry.get('runtime', 'run')} | "
                    f"{_cell(entry['source'])} |")
    for entry in table.get("precondition", []):
        kernel = f"; only where S's {entry['kernel']} kernel wins the registration" if entry.get("kernel") else ""
        rows.append(f"| `{entry['category']}` (precondition of `{entry['op']}`, `{entry['check']}`{kernel}): "
                    f"{_cell(entry['feature'])} | | raise (S's error); inputs no implementation takes: CPU "
                    f"fallback (`input_fallback`) | {_cell(entry['source'])} |")
    for entry in table.get("host_transfer", []):
        ops = ", ".join(f"`{op}`" for op in entry["ops"])
        rows.append(f"| `{entry['category']}` (host transfer): {_cell(entry['feature'])}: {ops} | | run (natively, "
                    f"with host work on every call) | {_cell(entry['source'])} |")
    return rows


def _verdict_rows(verdicts: dict) -> list[str]:
    """Overloads by verdict, as S gives them (the generated table) and as the simulator dispatches them."""
    from neuronkit.device.simulator.registration import simulated_verdicts
    from neuronkit.policy import load_policy

    simulated = simulated_verdicts(load_policy())
    rows = verdicts["overloads"]
    same = sum(simulated[name] == row["verdict"] for name, row in rows.items())
    lines = ["| verdict | overloads (S) | overloads (simulator) |", "|---|---|---|"]
    for verdict in ("native", "view", "composite", "cpu_fallback", "raise"):
        lines.append(f"| {verdict} | {sum(r['verdict'] == verdict for r in rows.values())} | "
                     f"{sum(v == verdict for v in simulated.values())} |")
    lines += ["", f"{same} of {len(rows)} overloads get the same verdict; every other one is a known difference "
                  "below (`test_op_table.py` checks it). S registrations that attach to no overload of torch "
                  f"{verdicts['meta']['torch']}: " + ", ".join(f"`{n}`" for n in verdicts["unattached"]) + "."]
    return lines


def _opinfo_rows() -> list[str]:
    """The last full OpInfo sweep's counts (`make opinfo` writes opinfo_counts.json)."""
    path = HERE / "opinfo_counts.json"
    if not path.exists():
        return ["No full sweep recorded yet: run `make opinfo`."]
    counts = json.loads(path.read_text())
    lines = [
        f"PyTorch's OpInfo database (`op_db`, torch {counts['torch']}) on `neuron` against the CPU "
        "(`tests/conformance/opinfo.py`): every OpInfo at float32, bfloat16, float16, int32, int64 and bool where "
        f"the CPU supports it, up to {counts['per_pair']} samples each, forward, and backward in float32 where the "
        "op has a gradient. Each sample's expected outcome is generated: the CPU run under the op audit's recorder "
        "classified by the same policy the device reads (all native: the CPU's result within the dtype's "
        "tolerance and no fallback; an op without a lowering: the same result and that fallback recorded; a gap: "
        "S's error). `make test` runs one sample of a fixed "
        f"{round(100 * SAMPLED_SHARE)}% of the (OpInfo, dtype) pairs (`test_opinfo.py`); `make opinfo` runs them "
        "all and rewrites the counts below.",
        "",
        "| outcome | samples |",
        "|---|---|",
        f"| all samples | {counts['samples']} |",
        f"| same as the CPU, native | {counts['same']} |",
        f"| same as the CPU, the predicted fallback recorded | {counts['fallback']} |",
        f"| raises, as S does | {counts['raise']} |",
        f"| a known difference (below) | {counts['known']} |",
        f"| unexpected | {counts['unexpected']} |",
    ]
    lines += ["", f"Last full sweep: {counts['seconds'] // 60} min on this 2-core machine"
                  + (f"; {counts['amended']}." if counts.get("amended") else ".")]
    if counts.get("known_by_difference"):
        lines += ["", "Known differences met (`opinfo_label` in the table below): " + "; ".join(
            f"{label}, {n}" for label, n in counts["known_by_difference"].items()) + "."]
    return lines


def _difference_row(difference: dict) -> str:
    scope = ""
    if difference.get("opinfo"):
        ops = ", ".join(f"`{n}`" for n in difference["opinfo"]) if "*" not in difference["opinfo"] else "any OpInfo"
        scope = f" (OpInfo samples: {ops}; {', '.join(difference['opinfo_outcomes'])})"
    elif difference.get("overloads"):
        scope = f" ({len(difference['overloads'])}: " + ", ".join(f"`{n}`" for n in difference["overloads"]) + ")"
    elif difference.get("categories"):
        scope = " (overloads of the rules " + ", ".join(f"`{c}`" for c in difference["categories"]) + ")"
    return f"| {_cell(difference['what'] + scope)} | {_cell(difference['why'])} |"


def _test_rows() -> list[str]:
    rows = ["| test | behaviour and source |", "|---|---|"]
    for path in sorted(HERE.glob("test_*.py")):
        module = ast.parse(path.read_text())
        for node in module.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = ast.get_docstring(node) or ""
                rows.append(f"| `{path.name}::{node.name}` | {_cell(doc)} |")
    return rows


def render() -> str:
    """The page's Markdown."""
    with (ROOT / "neuronkit" / "data" / "op_support.toml").open("rb") as fh:
        table = tomllib.load(fh)
    with (ROOT / "neuronkit" / "data" / "op_verdicts.json").open("rb") as fh:
        verdicts = json.load(fh)
    with (HERE / "known_differences.toml").open("rb") as fh:
        differences = tomllib.load(fh)["difference"]
    lines = [
        "# Fidelity: what the simulated device rests on",
        "",
        "Generated by `tests/conformance/build_page.py` from `neuronkit/data/op_verdicts.json`,",
        "`neuronkit/data/op_support.toml`, the conformance tests",
        "(`tests/conformance/`) and `tests/conformance/known_differences.toml`; do not edit by hand.",
        "S is the pre-release source snapshot `parmoham-aws/test-repo-parmoham` @ `98154b8` (torch-neuronx",
        "0.1.0); paths are inside it. \"Oct docs\" are the public-beta docs. `NEURONKIT_STRICT=1` raises on",
        "every documented gap and every CPU fallback, for the conservative reading.",
        "",
        "## Verdicts per overload",
        "",
        f"Every ATen overload of torch {verdicts['meta']['torch']}, as `data/build_op_table.py` derives it from S @ "
        f"`{verdicts['meta']['commit'][:7]}` (`neuronkit/data/op_verdicts.json`, one row per overload with its "
        "citation): `native` (S registers a kernel), `view` (metadata only), `composite` (decomposes; its parts "
        "decide), `cpu_fallback` (S's boxed fallback), and what the simulator does with each (`raise`: a hand-kept "
        "rule below).",
        "",
        *_verdict_rows(verdicts),
        "",
        "## The hand-kept policy and its evidence",
        "",
        *_policy_rows(table),
        "",
        "## PyTorch's OpInfo suite on the device",
        "",
        *_opinfo_rows(),
        "",
        "## Modelled behaviours, each with a conformance test",
        "",
        *_test_rows(),
        "",
        "## Known differences",
        "",
        "| difference | reason |",
        "|---|---|",
        *(_difference_row(d) for d in differences),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    PAGE.write_text(render())
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
