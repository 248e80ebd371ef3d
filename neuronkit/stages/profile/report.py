"""The report's numbers from the profiling stage's record: the NKI kernels' estimated engine time; and the
ops the profiler saw fall back to the CPU."""

from __future__ import annotations

from neuronkit.reporting.model import KeyNumber, RunRecords
from neuronkit.stages.profile.evidence import ProfileEvidence


def key_numbers(run: RunRecords) -> list[KeyNumber]:
    """A tile for the NKI kernels the profile saw: their ESTIMATED engine time on trn2
    (neuronkit/nki/cost.py)."""
    profile = run.evidence("profile")
    rows = [r for r in (profile.top_ops if profile is not None else [])
            if isinstance(getattr(r, "nki_est_us", None), (int, float))]
    if not rows:
        return []
    estimate = sum(r.nki_est_us for r in rows)
    return [KeyNumber("NKI kernels (estimate)", f"{_microseconds(estimate)} µs",
                      f"estimated engine time on trn2 of {len(rows)} NKI kernel(s) over the profiled steps "
                      "(neuronkit/nki/cost.py)", estimate, "µs", "estimate")]


def fallbacks(record: ProfileEvidence) -> list[tuple[str, str]]:
    """(op, "profile") for every op the profiler saw fall back to the CPU."""
    return [(str(row.name), "profile") for row in record.fallbacks]


def _microseconds(us: float) -> str:
    return f"{us:,.0f}" if us >= 1000 else f"{us:.3g}"
