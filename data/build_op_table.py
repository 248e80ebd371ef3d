"""Build the device's op verdicts, per overload, from the real backend's source (S) and torch's dispatcher.

S is the pre-release torch-neuronx source (parmoham-aws/test-repo-parmoham), read from a local git mirror
at one pinned commit. What S registers for the `neuron` device (PrivateUse1):

- C++: `m.impl("name")` inside `TORCH_LIBRARY_IMPL(aten, PrivateUse1 | AutogradPrivateUse1, m)` blocks of
  torch_neuronx/csrc (NeuronBindings.cpp:415-447,494-496; the kernels live in aten/NeuronNativeFunctions.cpp).
- Python: `@neuron_op("aten::...", priority)` classes (and its typed variants `@neuron_unary_op`,
  `@neuron_binary_op`, `@neuron_reduction_op`, `@neuron_comparison_op`), `@register_aten([...])` torch-mlir functions in
  the modules `auto_registration.discover_all_implementations` imports (python_ops, minus legacy/, jax/
  and modules named *test*; auto_registration.py:290-330), plus the literal `aten_lib.impl(...)` calls of
  python_ops/__init__.py (`_register_common_ops`). All of them reach `torch.library.Library.impl`.

A registered name attaches to exactly one overload: `aten::add.Tensor` to `add.Tensor`, a bare `aten::add`
to the default overload `add`, and a bare name with no default overload (S's `"aten::masked_fill"`,
torch_mlir/ops/indexing.py:214) to none at all: the dispatcher keeps it as a kernel for an operator that
does not exist. Such names are listed under [unattached].

Each overload of torch's `aten` namespace then gets one verdict, in the dispatcher's order for PrivateUse1:
  native        S registers a kernel for it;
  view          metadata only: S registers a C++ view kernel, or torch's composite kernel is a view;
  composite     no S kernel, and torch has a CompositeImplicitAutograd kernel or a CompositeExplicitAutograd
                (NonFunctional) kernel for it: it decomposes and its parts decide;
  cpu_fallback  none of these: S's boxed fallback runs it on the host (NeuronBindings.cpp:483-485). Those
                S's fallback whitelists as views (VIEW_OPS_WHITELIST, :170-229) are marked `silent`: no
                warning, not in get_fallback_ops() (:232-246).
Every row carries its citation. S's cpu_fallback_registrations.py is not read: its
`register_cpu_fallback_ops` is never called. The test-spec JSONs record xfails per upstream test, not per
op, so they do not decide verdicts (the hand-kept rows of op_support.toml cite them where they matter).

One table per torch release neuronkit supports (`policy.TORCH_RELEASES`: 2.13, 2.14), generated under that
torch and written to `neuronkit/data/op_verdicts-torch<release>.json`; the device reads the running torch's
(`policy.verdicts_path`). S is the same for both; what differs is torch's own op set: the overloads a release
adds or drops, and the composite kernels it gives an overload. An overload a release adds that S registers
nothing for gets the verdict S's dispatcher gives it (a composite kernel, or the boxed fallback) and a source
saying so: S @ 98154b8 (torch ~2.10) predates it, so it cannot tell whether the beta's torch-neuronx build for
that release registers a kernel for it (docs/fidelity.md lists these overloads).

Usage: ``python data/build_op_table.py [--mirror DIR] [--commit SHA] [--out PATH] [--check]``, under the torch
whose table it writes (`.venv` for 2.13, `.venv-2.14` for 2.14). ``--check`` compares with the committed table
and exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import NamedTuple

if __name__ == "__main__":  # torch's own dispatcher, without an out-of-tree device backend's registrations
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402

from neuronkit.policy import (  # noqa: E402  (autoload off: no device)
    TORCH_RELEASES,
    later_registration_wins,
    returns_view,
    torch_release,
    verdicts_path,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = verdicts_path()  # the running torch's release: neuronkit/data/op_verdicts-torch2.14.json under 2.14.x
MIRROR = Path(os.environ.get("NEURONKIT_S_MIRROR", "/work/.mirror/parmoham-aws+test-repo-parmoham/repo"))
COMMIT = "98154b867aa24562a3213e520d9ad7fd41032291"  # S, pinned: torch-neuronx 0.1.0 (April 2026)
REPO = "parmoham-aws/test-repo-parmoham"
VERDICTS = ("native", "view", "composite", "cpu_fallback")
_DEVICE_KEYS = ("PrivateUse1", "AutogradPrivateUse1")
# The decorators that register an implementation class for an aten name (auto_registration.py:44-79,189-275).
_NEURON_OP_DECORATORS = ("neuron_op", "neuron_unary_op", "neuron_binary_op", "neuron_reduction_op",
                         "neuron_comparison_op")
_FALLBACK = "torch_neuronx/csrc/core/NeuronBindings.cpp:483-485"
_WHITELIST_FILE = "torch_neuronx/csrc/core/NeuronBindings.cpp"


def read_tree(mirror: Path, commit: str) -> dict[str, str]:
    """The text of S's C++ and Python sources at `commit` ("path" -> text), read in one `git archive`."""
    archive = subprocess.run(["git", "-C", str(mirror), "archive", "--format=tar", commit, "torch_neuronx"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8", "replace") for m in tar.getmembers()
                if m.isfile() and m.name.endswith((".cpp", ".py"))}


def _files(tree: dict[str, str], under: str, suffix: str) -> list[str]:
    return sorted(p for p in tree if p.startswith(under + "/") and p.endswith(suffix))


def cpp_registrations(tree: dict[str, str]) -> list[tuple[str, str]]:
    """(registered name, "path:line") for every `m.impl` in an aten PrivateUse1/AutogradPrivateUse1 block."""
    found = []
    block = re.compile(r"TORCH_LIBRARY_IMPL\(\s*aten\s*,\s*(\w+)\s*,\s*m\s*\)")
    impl = re.compile(r'm\.impl\(\s*(?:TORCH_SELECTIVE_NAME\(\s*)?"([^"]+)"')
    for path in _files(tree, "torch_neuronx/csrc", ".cpp"):
        key, depth = None, 0
        for number, line in enumerate(tree[path].splitlines(), 1):
            code = line.split("//", 1)[0]
            opened = block.search(code)
            if opened:
                key, depth = opened.group(1), 0
            if key is None:
                continue
            if key in _DEVICE_KEYS:
                for name in impl.findall(code):
                    found.append((name if "::" in name else f"aten::{name}", f"{path}:{number}"))
            depth += code.count("{") - code.count("}")
            if depth <= 0 and "}" in code:
                key = None
    return found


def _imported(path: str) -> bool:
    """Whether auto_registration.discover_all_implementations imports the module (auto_registration.py:309-320)."""
    module = path.removesuffix(".py").replace("/", ".")
    return "test" not in module and ".legacy" not in module and ".jax" not in module


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for item in node.elts for s in _strings(item)]
    return []


class Registration(NamedTuple):
    """One registration of S: the name it gives, where, and how it competes for the overload."""

    name: str
    source: str  # "path:line"
    stage: int  # 0 C++, then Python in python_ops/__init__.py:93-104's order: 1 common, 2 @neuron_op, 3 torch-mlir
    priority: int | None = None  # @neuron_op's
    static: tuple[tuple[int, ...], tuple[str, ...]] | None = None  # torch-mlir's static_argnums/argnames


def _ints(node: ast.AST | None) -> tuple[int, ...]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int))
    return ()


def python_registrations(tree: dict[str, str]) -> list[Registration]:
    """S's Python registrations: `@neuron_op` and its typed variants (with their priority), `@register_aten` (with its static arguments,
    except for the preprocessing ones, whose key is of other arguments) and literal `aten_lib.impl` calls."""
    found = []
    for path in _files(tree, "torch_neuronx/python_ops", ".py"):
        if not _imported(path):
            continue
        module = ast.parse(tree[path])
        for node in ast.walk(module):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            keywords = {k.arg: k.value for k in node.keywords}
            where = f"{path}:{node.lineno}"
            if called in _NEURON_OP_DECORATORS and node.args:
                given = keywords.get("priority", node.args[1] if len(node.args) > 1 else None)
                priority = given.value if isinstance(given, ast.Constant) else 50
                found += [Registration(name, where, 2, priority=priority) for name in _strings(node.args[0])]
            elif called == "register_aten" and node.args:
                preprocessing = keywords.get("uses_preprocessing")
                static = None if isinstance(preprocessing, ast.Constant) and preprocessing.value else (
                    _ints(keywords.get("static_argnums")), tuple(_strings(keywords.get("static_argnames", ast.List([])))))
                found += [Registration(name, where, 3, static=static) for name in _strings(node.args[0])]
            elif called == "impl" and len(node.args) >= 3 and _strings(node.args[0]) \
                    and _strings(node.args[2]) and _strings(node.args[2])[0] in _DEVICE_KEYS:
                name = _strings(node.args[0])[0]
                found.append(Registration(name if "::" in name else f"aten::{name}", where, 1))
    return found


def static_scalars(qualified: str, static: tuple[tuple[int, ...], tuple[str, ...]]) -> list[str]:
    """The Scalar arguments of an overload a torch-mlir registration keys its NEFF by value: its
    static_argnums index the arguments the dispatcher passes positionally, its static_argnames the keyword
    ones (torch_mlir/kernel.py:83-99, kernels/base.py:131-136, processors/argument_processor.py:215-237).
    Other static arguments (ints, dtypes, tensors' shapes) are keyed by value or shape anyway."""
    base, _, overload = qualified.removeprefix("aten::").partition(".")
    arguments = getattr(getattr(torch.ops.aten, base), overload or "default")._schema.arguments
    positional = [a for a in arguments if not a.kwarg_only]
    nums, names = static
    chosen = [positional[i] for i in nums if i < len(positional)] + [a for a in arguments if a.name in names]
    return [a.name for a in chosen if str(a.type).removeprefix("Optional[").rstrip("]") in ("number", "Scalar")]


def view_whitelist(tree: dict[str, str]) -> tuple[frozenset[str], str]:
    """S's fallback's VIEW_OPS_WHITELIST (op names without overload) and its "path:lines"."""
    lines = tree[_WHITELIST_FILE].splitlines()
    start = next(i for i, line in enumerate(lines) if "VIEW_OPS_WHITELIST" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("};"))
    names = re.findall(r'"(aten::\w+)"', "\n".join(line.split("//", 1)[0] for line in lines[start:end]))
    return frozenset(names), f"{_WHITELIST_FILE}:{start + 1}-{end + 1}"


# What each registration stage is (S python_ops/__init__.py:85-98 registers them in this order).
_KINDS = {0: "c++", 1: "common", 2: "xla", 3: "torch-mlir"}


def _winner(entries: list[Registration], later_wins: bool) -> Registration:
    """The registration the dispatcher keeps: a Python one over C++; of the Python stages the first
    (torch <= 2.12) or the last (torch >= 2.13) registered."""
    if later_wins:
        return max(entries, key=lambda e: (e.stage != 0, e.stage))
    return min(entries, key=lambda e: (e.stage == 0, e.stage))


def _has(name: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)


def _earlier_release() -> tuple[str, frozenset[str]] | None:
    """The supported release before the running torch's and the overloads of its committed table, if any."""
    release = torch_release()
    earlier = [r for r in TORCH_RELEASES if tuple(map(int, r.split("."))) < tuple(map(int, release.split(".")))]
    if not earlier or not verdicts_path(earlier[-1]).exists():
        return None
    return earlier[-1], frozenset(json.loads(verdicts_path(earlier[-1]).read_text())["overloads"])


def verdicts(mirror: Path, commit: str) -> dict:
    """The table: meta, every aten overload's verdict with its citation, and the unattached names."""
    overloads = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    known = set(overloads)
    registered: dict[str, list[Registration]] = {}
    unattached: dict[str, str] = {}
    tree = read_tree(mirror, commit)
    for entry in [Registration(n, s, 0) for n, s in cpp_registrations(tree)] + python_registrations(tree):
        # "aten::add" names the default overload, whose dispatcher name is "aten::add" itself.
        if entry.name in known:
            registered.setdefault(entry.name, []).append(entry)
        else:
            unattached.setdefault(entry.name, entry.source)
    whitelist, whitelist_source = view_whitelist(tree)
    rows = {}
    for name in overloads:
        view = returns_view(name)
        if name in registered:
            entries = registered[name]
            # Python replaces a C++ kernel. Of the Python ones, which wins depends on torch
            # (`policy.later_registration_wins`): up to 2.12 torch.library refused a second Python kernel for
            # the same key (S's later registration failed and was swallowed, torch_mlir/operation_registry.py:
            # 136-146), so the first stage won; from 2.13 (PR #182293, allow_override=True) the later one
            # overrides it. @neuron_op ones of one name are one operation, tried by priority
            # (auto_registration.py:96-113).
            winner = _winner(entries, later_registration_wins(torch.__version__))
            row = {"verdict": "view" if view and winner.stage == 0 else "native",
                   "source": ", ".join([winner.source] + sorted({e.source for e in entries} - {winner.source}))}
            priorities = sorted({e.priority for e in entries if e.stage == winner.stage and e.priority is not None})
            if priorities:
                row["priority"] = priorities[-1]
            static = static_scalars(name, winner.static) if winner.static else []
            if static:
                row["static"] = static
            stages = sorted({e.stage for e in entries if e.stage > 0})
            if len(stages) > 1:  # registered twice in Python: each rule's winner, for another torch (policy.py)
                row["registrations"] = {
                    rule: {"kernel": _KINDS[chosen.stage], "source": chosen.source,
                           "static": static_scalars(name, chosen.static) if chosen.static else []}
                    for rule, chosen in (("first", _winner(entries, False)), ("later", _winner(entries, True)))}
        elif _has(name, "CompositeImplicitAutograd"):
            row = {"verdict": "composite",
                   "source": "torch: CompositeImplicitAutograd kernel (decomposes above the device); S registers none"}
        elif _has(name, "CompositeExplicitAutograd") or _has(name, "CompositeExplicitAutogradNonFunctional"):
            key = "CompositeExplicitAutograd" if _has(name, "CompositeExplicitAutograd") \
                else "CompositeExplicitAutogradNonFunctional"
            row = {"verdict": "view" if view else "composite",
                   "source": f"torch: {key} kernel (serves PrivateUse1); S registers none"}
        else:
            row = {"verdict": "cpu_fallback", "source": f"S registers none: boxed CPU fallback ({_FALLBACK})"}
            if name.split(".", 1)[0] in whitelist:
                row["silent"] = True
                row["source"] += f"; whitelisted as a view, not logged ({whitelist_source})"
        rows[name] = row
    earlier = _earlier_release()
    if earlier is not None:
        # Overloads this torch adds: S's registrations name none of them (none is registered), so the verdict is
        # only what S's dispatcher does with an overload it registers nothing for.
        release, known_before = earlier
        for name, row in rows.items():
            if name not in known_before and name not in registered:
                row["source"] += (f"; new in torch {torch_release()} (not an overload of torch {release}): S @ "
                                  f"{commit[:7]} (torch ~2.10) predates it, so it cannot tell whether torch-neuronx "
                                  f"{torch_release()} registers a kernel for it")
    counts = {v: sum(r["verdict"] == v for r in rows.values()) for v in VERDICTS}
    meta = {"source": REPO, "commit": commit, "torch": torch.__version__.split("+", 1)[0],
            "generator": "data/build_op_table.py", "counts": counts,
            "winner": "later" if later_registration_wins(torch.__version__) else "first"}
    return {"meta": meta, "unattached": dict(sorted(unattached.items())), "overloads": rows}


def render(table: dict) -> str:
    """The table as JSON (read at every start of the device: a JSON parse is ~30x faster than TOML's), one
    overload per line so a diff shows which verdicts changed."""
    head = {"generated": "by data/build_op_table.py from S at meta.commit and torch's dispatcher: do not edit. "
                         "Verdicts: native, view, composite, cpu_fallback (see the script's docstring). Hand-kept "
                         "rules (documented gaps, findings, preconditions) are in op_support.toml and take "
                         "precedence where they apply. `unattached`: S registrations that name no overload.",
            "meta": table["meta"], "unattached": table["unattached"]}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
    lines.append('  "overloads": {')
    rows = list(table["overloads"].items())
    lines += [f"    {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}{',' if i < len(rows) - 1 else ''}"
              for i, (k, v) in enumerate(rows)]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mirror", type=Path, default=MIRROR, help="a git mirror of S")
    parser.add_argument("--commit", default=COMMIT, help="the S commit to read (default: the pinned one)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args(argv)
    if not (args.mirror / "HEAD").exists() and not (args.mirror / ".git").exists():
        print(f"error: no git mirror of S at {args.mirror} (--mirror or NEURONKIT_S_MIRROR)", file=sys.stderr)
        return 2
    text = render(verdicts(args.mirror, args.commit))
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'differs from what S gives: regenerate it'}")
        return 0 if same else 1
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
