"""PyTorch's OpInfo suite on the device, sampled (tests/conformance/opinfo.py; `make opinfo` runs all of it)."""

from __future__ import annotations

from tests.conformance import opinfo


def test_sampled_opinfo_samples_behave_as_the_policy_predicts():
    """op_support.toml and op_verdicts-torch<release>.json (generated from S): each OpInfo sample of PyTorch's op_db, run on
    the CPU under the audit's recorder, predicts the device's outcome from the policy (every op native: the
    same result as the CPU within the dtype's tolerance and no fallback; an op without a lowering: the same
    result and that fallback recorded; a gap: the device raises); the device then runs it, forward and in
    float32 backward. A deterministic SAMPLED_SHARE of the (OpInfo, dtype) pairs, one sample each; an
    outcome the prediction does not give must be a known difference with its S citation."""
    tally = opinfo.sweep(share=opinfo.SAMPLED_SHARE, per_pair=1)
    assert sum(tally.counts.values()) > 80
    assert tally.counts["same"] > 0 and tally.counts["fallback"] > 0 and tally.counts["raise"] > 0
    assert not tally.unexpected, "\n".join(f"{r.case.label}: expected {r.expected}, {r.detail}"
                                           for r in tally.unexpected)
