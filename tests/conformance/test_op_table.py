"""The op table, per overload: neuronkit/data/op_verdicts-torch<release>.json is generated from S's registrations
and that torch release's own overloads by data/build_op_table.py (one table per release the public beta ships
for: 2.13 and 2.14, the running torch's read), and the simulator's dispatch gives the same verdict for every ATen
overload of the running torch but the listed known differences. Source: S = parmoham-aws/test-repo-parmoham @
98154b8."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import torch_neuronx
from neuronkit.policy import TORCH_RELEASES, VERDICTS, load_policy, torch_release, verdicts_path
from tests.conformance.build_page import simulated_verdicts

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "data"))
import build_op_table  # noqa: E402

N = "neuron"
_COMPOSITE_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _known_differences() -> list[dict]:
    with (Path(__file__).parent / "known_differences.toml").open("rb") as fh:
        return [d for d in tomllib.load(fh)["difference"] if "overloads" in d or "categories" in d]


@pytest.mark.subprocess
def test_committed_table_is_what_s_gives(forked_python):
    """S: the pinned commit's registrations (csrc/core/NeuronBindings.cpp:415-496, python_ops @neuron_op and
    @register_aten, python_ops/__init__.py:12-83) resolved against the running torch's overloads give exactly
    its committed table (neuronkit/data/op_verdicts-torch2.13.json under torch 2.13, -torch2.14.json under 2.14)."""
    if not build_op_table.MIRROR.exists():
        pytest.skip(f"no mirror of S at {build_op_table.MIRROR}: only the committed table's invariants are checked")
    # torch's own overloads, with no device registered: a fork of a process that imported torch without it,
    # autoload off (conftest's forked_python), runs the script's check as `build_op_table.py --check` would
    done = forked_python(f"""
        import sys
        sys.path[0] = {str(ROOT / "data")!r}
        import build_op_table
        sys.exit(build_op_table.main(["--check"]))
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_committed_table_invariants():
    """S: the pinned commit (meta.commit): every ATen overload of the running torch has one verdict with a citation; a native
    row cites an S path:line; a composite or view row has a composite kernel upstream; a CPU fallback row has
    none; the counts add up; an unattached registration names no overload (S's bare "aten::masked_fill",
    torch_mlir/ops/indexing.py:214)."""
    policy = load_policy()
    meta, rows = policy.verdict_meta, policy.overloads
    assert re.fullmatch(r"[0-9a-f]{40}", meta["commit"]) and meta["commit"] == build_op_table.COMMIT
    assert meta["torch"] == torch.__version__.split("+", 1)[0]
    overloads = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}
    assert set(rows) == overloads
    assert meta["counts"] == {v: sum(r["verdict"] == v for r in rows.values()) for v in VERDICTS}
    for name, row in rows.items():
        composite = any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k) for k in _COMPOSITE_KEYS)
        assert row["verdict"] in VERDICTS and row["source"], name
        if row["verdict"] == "native":
            assert re.search(r"torch_neuronx/\S+:\d+", row["source"]), name
        elif row["verdict"] == "composite":
            assert composite, name
        elif row["verdict"] == "cpu_fallback":
            assert not composite and "NeuronBindings.cpp:483-485" in row["source"], name
    assert "aten::masked_fill" in policy.unattached and not overloads & set(policy.unattached)


def test_a_table_per_supported_torch_and_what_each_release_adds():
    """S: the pinned commit's registrations, one table per torch release the public beta ships for (docs:
    torch-neuronx 2.13.x and 2.14.x, pyproject's torch range), each with its release's overloads; the device
    reads the running torch's. An overload a release adds over the one before, which S registers nothing for,
    says in its source that S @ 98154b8 (torch ~2.10) predates it; no other row says so."""
    with (ROOT / "pyproject.toml").open("rb") as fh:
        pins = [d for d in tomllib.load(fh)["project"]["dependencies"] if re.match(r"torch\b", d)]
    assert pins == [f"torch>={TORCH_RELEASES[0]},<2.{int(TORCH_RELEASES[-1].split('.')[1]) + 1}"], pins
    assert torch_release() in TORCH_RELEASES and load_policy().verdict_meta["torch"].startswith(torch_release() + ".")
    tables = {}
    for release in TORCH_RELEASES:
        with verdicts_path(release).open("rb") as fh:
            tables[release] = json.load(fh)
        assert tables[release]["meta"]["torch"].startswith(release + ".")
        assert tables[release]["meta"]["commit"] == build_op_table.COMMIT
    for earlier, release in zip(TORCH_RELEASES, TORCH_RELEASES[1:]):
        before, rows = tables[earlier]["overloads"], tables[release]["overloads"]
        # S's registrations cite S's paths (torch_neuronx/...); the others cite torch's kernel or S's fallback
        added = {n for n in rows if n not in before and not rows[n]["source"].startswith("torch_neuronx/")}
        for name, row in rows.items():
            assert (f"new in torch {release} (not an overload of torch {earlier})" in row["source"]) == (
                name in added), name
    assert not any("new in torch" in row["source"] for row in tables[TORCH_RELEASES[0]]["overloads"].values())


def test_simulator_verdicts_equal_the_table_but_the_known_differences():
    """S: the generated table (the running torch's data/op_verdicts-torch<release>.json) is what S does with each
    overload; the simulator's registrations (registration.py `_named_overloads`, its boxed kernel and the policy)
    do the same for every ATen overload of the running torch except those known_differences.toml lists, each
    with its reason."""
    policy = load_policy()
    simulated = simulated_verdicts(policy)
    differ = {name for name, verdict in simulated.items() if verdict != policy.overloads[name]["verdict"]}
    listed: set[str] = set()
    for difference in _known_differences():
        named = set(difference.get("overloads", []))
        categories = set(difference.get("categories", []))
        covered = named | {n for n in differ if policy.rule(n).category in categories}
        assert named <= differ, f"listed but not different (stale): {sorted(named - differ)}"
        listed |= covered
    assert sorted(differ - listed) == []


def _fallbacks(run) -> list[str]:
    torch_neuronx.clear_op_tracking()
    run()
    return torch_neuronx.get_fallback_ops()


@pytest.mark.parametrize("name, run", [
    ("aten::logsumexp.out", lambda x: torch.logsumexp(x, 1, out=torch.empty(4, device=x.device))),
    ("aten::pixel_shuffle", lambda x: torch.pixel_shuffle(x.reshape(1, 4, 2, 2), 2)),
    ("aten::diag_embed", lambda x: torch.diag_embed(x)),
    ("aten::select_scatter", lambda x: torch.select_scatter(x, x[0], 0, 1)),
    ("aten::new_empty_strided", lambda x: x.new_empty_strided((2, 2), (2, 1)).fill_(1.0)),
])
def test_composites_s_decomposes_run_on_the_device(name, run):
    """S: none of these overloads is registered; each has a CompositeExplicitAutograd(NonFunctional) kernel
    upstream, so on S it decomposes into registered ops and nothing falls back (fidelity audit 2.3: 48
    such overloads were reported as CPU fallbacks)."""
    x = torch.randn(4, 4)
    assert load_policy().overloads[name]["verdict"] == "composite"
    assert _fallbacks(lambda: run(x.to(N))) == []
    torch.testing.assert_close(run(x.to(N)).cpu(), run(x))


@pytest.mark.parametrize("name, run", [
    ("aten::masked_fill_.Tensor", lambda x: x.clone().masked_fill_(x > 0, torch.tensor(0.5, device=x.device))),
    ("aten::min.dim_min", lambda x: torch.min(x, 1, out=(torch.empty(4, device=x.device),
                                                         torch.empty(4, dtype=torch.long, device=x.device)))),
    ("aten::floor_divide_.Tensor", lambda x: x.clone().floor_divide_(x.abs() + 1)),
    ("aten::remainder.Scalar_Tensor", lambda x: torch.remainder(3.0, x.abs() + 1)),
])
def test_overloads_s_does_not_register_fall_back_under_their_own_name(name, run):
    """S: only masked_fill_.Scalar is registered (torch_mlir/ops/indexing.py:214; its bare "aten::masked_fill"
    attaches to no overload), min only as min/min.unary_out, floor_divide and remainder only for other
    overloads: these take the boxed CPU fallback (NeuronBindings.cpp:232-246,483-485), which names them
    with their overload (fidelity audit 2.5: 21 such overloads were reported native)."""
    x = torch.randn(4, 4)
    assert load_policy().overloads[name]["verdict"] == "cpu_fallback"
    assert name in _fallbacks(lambda: run(x.to(N)))
    got, want = run(x.to(N)), run(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g.cpu(), w)


def test_view_as_real_runs_through_the_fallback_unlogged():
    """S: view_as_real has no registration and no composite kernel, so its complex input takes the boxed CPU
    fallback, which has no dtype check (NeuronBindings.cpp:483-485) and does not log the whitelisted view
    (VIEW_OPS_WHITELIST, :170-229, :232-246)."""
    z = torch.randn(3, 2).to(torch.complex64)
    assert load_policy().overloads["aten::view_as_real"] == {
        **load_policy().overloads["aten::view_as_real"], "verdict": "cpu_fallback", "silent": True}
    assert _fallbacks(lambda: torch.view_as_real(z.to(N))) == []
    torch.testing.assert_close(torch.view_as_real(z.to(N)).cpu(), torch.view_as_real(z))


@pytest.mark.parametrize("name, run", [
    ("aten::argmax.out", lambda x: torch.argmax(x, -1)),
    ("aten::isin.Tensor_Tensor_out", lambda x: torch.isin(x, x[:2])),
    ("aten::sort.values_stable", lambda x: torch.sort(x, stable=True)),
])
def test_fallback_names_are_the_overloads_s_fallback_sees(name, run):
    """S: the boxed fallback names the op it receives by schema name and overload (c10::toString(operator_name),
    NeuronBindings.cpp:232-246). argmax, isin and sort(stable=True) are structured: torch's
    CompositeExplicitAutogradNonFunctional kernel serves PrivateUse1 and calls the out= overload, which is
    what the fallback receives; the op audit names it the same way, so an allow-list built from either holds
    on the device."""
    from torch import nn

    from neuronkit.op_audit import audit

    class Call(nn.Module):
        def forward(self, x):
            return run(x)

    x = torch.randn(3, 5)
    assert _fallbacks(lambda: run(x.to(N))) == [name]
    assert [f.op for f in audit(Call(), x).findings if f.category == "cpu_fallback"] == [name]
