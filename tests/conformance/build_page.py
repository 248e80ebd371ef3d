"""Render docs/fidelity.md: every modelled behaviour with its source, and the known differences.

The page is generated from four places, so it cannot drift from what the simulator does: the verdict of
every overload of each supported torch release (neuronkit/data/op_verdicts-torch<release>.json, generated from
S) next to the simulator's, the rules of neuronkit/data/op_support.toml (each with its evidence), the
conformance tests in this folder (each test's docstring cites its source), and known_differences.toml.

The simulator's verdicts can only be computed under the torch they are for, so they are recorded per release
in simulated_counts.json: `python tests/conformance/build_page.py` records the running torch's and rewrites the
page (run it under both venvs, `.venv` and `.venv-2.14`, after a change to the policy or the registrations);
tests/conformance/test_page.py fails when the running torch's record or the page is out of date. The page
itself renders from files only, the same under either torch.
"""

from __future__ import annotations

import ast
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PAGE = ROOT / "docs" / "fidelity.md"
SIMULATED = HERE / "simulated_counts.json"  # the simulator's verdict counts per torch release
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


_VERDICT_ORDER = ("native", "view", "composite", "cpu_fallback", "raise")


def simulated_verdicts(policy: Any) -> dict[str, str]:
    """What the simulator does with each ATen overload, from its registrations and the policy (no op runs):
    `raise`, `native`, `view`, `cpu_fallback` (the overload reaches the device's kernel), or `composite`
    (a composite kernel runs above it). Compared with the running torch's op table by the conformance tests."""
    import torch

    from neuronkit.device.simulator.registration import _named_overloads
    from neuronkit.policy import returns_view

    named = {f"aten::{q}" for q in _named_overloads(policy, strict=False)}
    found = {}
    for qualified in sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")):
        composite = any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key) for key in (
            "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"))
        implicit = torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeImplicitAutograd")
        rule = policy.rule(qualified)
        if composite and (implicit or qualified not in named):
            found[qualified] = "view" if rule.is_view and not implicit and returns_view(qualified) else "composite"
        elif rule.blocked:
            found[qualified] = "raise"
        elif policy.runs_natively(qualified) and rule.runtime != "decompose":
            found[qualified] = "view" if rule.is_view and returns_view(qualified) else "native"
        else:
            found[qualified] = "cpu_fallback"
    return found


def simulated_counts() -> dict:
    """The running torch's record: how many overloads the simulator gives each verdict, and how many agree
    with the table (needs torch and the device's registrations: not called by `render`)."""
    import torch

    from neuronkit.policy import load_policy, torch_release

    policy = load_policy()
    simulated = simulated_verdicts(policy)
    same = sum(simulated[name] == row["verdict"] for name, row in policy.overloads.items())
    return {torch_release(): {"torch": torch.__version__.split("+", 1)[0],
                              "counts": {v: sum(s == v for s in simulated.values()) for v in _VERDICT_ORDER},
                              "same": same, "overloads": len(simulated)}}


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def _tables() -> dict[str, dict]:
    """Each supported release's committed op table, oldest first ("2.13" -> the table; the files
    neuronkit/data/op_verdicts-torch<release>.json, read without importing torch)."""
    paths = {path.stem.removeprefix("op_verdicts-torch"): path
             for path in (ROOT / "neuronkit" / "data").glob("op_verdicts-torch*.json")}
    return {release: json.loads(paths[release].read_text()) for release in sorted(paths, key=_release_key)}


def _names(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _verdict_rows(tables: dict[str, dict], simulated: dict) -> list[str]:
    """Overloads by verdict, per torch release, as S gives them (the generated tables) and as the simulator
    dispatches them (its record), then what each release changes against the one before."""
    releases = list(tables)
    header = "| verdict | " + " | ".join(f"torch {tables[r]['meta']['torch']}: S | simulator" for r in releases) + " |"
    lines = [header, "|---|" + "---|---|" * len(releases)]
    for verdict in _VERDICT_ORDER:
        cells = []
        for release in releases:
            rows = tables[release]["overloads"]
            record = simulated.get(release)
            cells += [str(sum(r["verdict"] == verdict for r in rows.values())),
                      str(record["counts"][verdict]) if record else "not recorded"]
        lines.append(f"| {verdict} | " + " | ".join(cells) + " |")
    lines.append("")
    for release in releases:
        table, record = tables[release], simulated.get(release)
        agree = (f"{record['same']} of {len(table['overloads'])} overloads get the same verdict on the simulator; "
                 "every other one is a known difference below (`test_op_table.py` checks it)") if record else (
                 "no simulator record: run `python tests/conformance/build_page.py` under it")
        lines.append(f"- torch {table['meta']['torch']} (`neuronkit/data/op_verdicts-torch{release}.json`): {agree}.")
    unattached = {tables[release]["meta"]["torch"]: tuple(tables[release]["unattached"]) for release in releases}
    if len(set(unattached.values())) == 1:  # one list for all
        unattached = {" or ".join(unattached): next(iter(unattached.values()))}
    for version, names in unattached.items():
        lines += ["", f"S registrations that attach to no overload of torch {version}: {_names(names)}."]
    for earlier, release in zip(releases, releases[1:]):
        before, after = tables[earlier]["overloads"], tables[release]["overloads"]
        new = tables[release]["meta"]["torch"]
        lines += ["", f"### torch {new} against torch {tables[earlier]['meta']['torch']}", "",
                  "The same S, another op set: what torch itself adds, drops or decomposes differently, each "
                  "overload with its verdict under each release.", "",
                  "| overload | torch " + tables[earlier]["meta"]["torch"] + " | torch " + new + " | why |",
                  "|---|---|---|---|"]
        for name in sorted(set(before) | set(after)):
            old_row, new_row = before.get(name), after.get(name)
            if old_row is not None and new_row is not None and old_row["verdict"] == new_row["verdict"]:
                continue
            if old_row is None:
                why = f"added by torch {release}: {_cell(new_row['source'])}"
            elif new_row is None:
                why = f"not an ATen overload of torch {release}: torch dropped it"
            else:
                why = f"torch {release}: {_cell(new_row['source'])} (torch {earlier}: {_cell(old_row['source'])})"
            lines.append(f"| `{name}` | {old_row['verdict'] if old_row else 'none'} | "
                         f"{new_row['verdict'] if new_row else 'none'} | {why} |")
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


def _difference_row(difference: dict, tables: dict[str, dict]) -> str:
    scope = ""
    if difference.get("added_in"):  # the overloads that release's table marks as newer than S
        release = difference["added_in"]
        added = [n for n, row in tables[release]["overloads"].items() if f"new in torch {release} " in row["source"]]
        scope = f" ({len(added)}: " + ", ".join(f"`{n}` ({tables[release]['overloads'][n]['verdict']})"
                                                for n in added) + ")"
    elif difference.get("opinfo"):
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
    tables = _tables()
    simulated = json.loads(SIMULATED.read_text()) if SIMULATED.exists() else {}
    releases = ", ".join(f"`neuronkit/data/op_verdicts-torch{r}.json`" for r in tables)
    commit = next(iter(tables.values()))["meta"]["commit"]
    with (HERE / "known_differences.toml").open("rb") as fh:
        differences = tomllib.load(fh)["difference"]
    lines = [
        "# Fidelity: what the simulated device rests on",
        "",
        f"Generated by `tests/conformance/build_page.py` from {releases},",
        "`neuronkit/data/op_support.toml`, the conformance tests",
        "(`tests/conformance/`, with the simulator's verdict counts per torch in `simulated_counts.json`) and",
        "`tests/conformance/known_differences.toml`; do not edit by hand.",
        "S is the pre-release source snapshot `parmoham-aws/test-repo-parmoham` @ `98154b8` (torch-neuronx",
        "0.1.0); paths are inside it. \"Oct docs\" are the public-beta docs. `NEURONKIT_STRICT=1` raises on",
        "every documented gap and every CPU fallback, for the conservative reading.",
        "",
        "## Verdicts per overload",
        "",
        "Every ATen overload of each torch release the public beta ships for ("
        + ", ".join(t["meta"]["torch"] for t in tables.values()) + "), as `data/build_op_table.py` derives it "
        f"from S @ `{commit[:7]}` and that torch's own overloads (one table per release, one row per overload "
        "with its citation; the device reads the running torch's): `native` (S registers a kernel), `view` "
        "(metadata only), `composite` (decomposes; its parts decide), `cpu_fallback` (S's boxed fallback), and "
        "what the simulator does with each (`raise`: a hand-kept rule below).",
        "",
        *_verdict_rows(tables, simulated),
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
        *(_difference_row(d, tables) for d in differences),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    record = json.loads(SIMULATED.read_text()) if SIMULATED.exists() else {}
    record.update(simulated_counts())
    SIMULATED.write_text(json.dumps({r: record[r] for r in sorted(record, key=_release_key)}, indent=2) + "\n")
    PAGE.write_text(render())
    print(f"wrote {SIMULATED.relative_to(ROOT)} (torch {', '.join(sorted(record))}) and {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
