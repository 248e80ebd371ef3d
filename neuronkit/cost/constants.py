"""The cost model's few fitted physical constants and the bands its estimates carry, as frozen in
`neuronkit/data/cost_model.toml` (`bench/bench_cost.py --fit` refits them; a test holds the file to
what the published rows give)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from neuronkit.resources import data_toml
from neuronkit.units import format_count


@dataclass(frozen=True, slots=True)
class Constants:
    """Achievable fractions of the published peaks, the latency every collective pays, and the bands."""

    compute_fraction: float  # of dense peak FLOP/s, on matmul-dominated work
    hbm_fraction: float  # of HBM bandwidth, on streaming reads (decode, optimizer step)
    collective_latency_s: float  # fixed cost of one collective, whatever its size
    prefill_compute_fraction: float  # of dense peak FLOP/s, in an inference prefill (a compiled context encoding)
    band_training: float  # ± fraction: predicted/published throughput of the training rows lies within 1 ± this
    band_serving: float  # ± fraction, serving rows' output tokens/s and time per output token
    band_ttft: float  # ± fraction, serving rows' time to first token (outside the serving band: stated apart)
    fitted_on: tuple[str, ...]  # the published rows the constants were fitted on
    checked_training: int  # rows the training band was measured on (fitting rows excluded)
    checked_serving: int
    retrieved: str  # when the published rows were read
    parameters_checked: tuple[int, int] = (0, 0)  # the smallest and largest model among the published rows

    def range_notes(self, parameters: int, experts: bool) -> list[str]:
        """Notes when a model lies outside what the published rows cover: its estimate extrapolates."""
        low, high = self.parameters_checked
        notes = []
        if not low <= parameters <= high:
            notes.append(f"a {format_count(parameters)}-parameter model lies outside the published rows' "
                         f"{format_count(low)}-{format_count(high)}: the band was not measured there (small models pay "
                         "fixed per-step and per-launch costs the model does not hold)")
        if experts:
            notes.append("a mixture of experts: no published row the band was measured on is one; the experts are "
                         "split by tensor parallel (no expert parallelism) and decoding reads every expert's weights")
        return notes

    def checked_on(self, kind: str) -> str:
        """Which published rows the `kind` (training or serving) band was measured on, in one line."""
        if kind == "training":
            return (f"±{self.band_training:.0%}: 9 in 10 of {self.checked_training} published Trn1 training rows "
                    f"(Neuron SDK docs, retrieved {self.retrieved}) fall within it; fitted on "
                    f"{len(self.fitted_on)} others")
        return (f"±{self.band_serving:.0%} on output tokens/s and time per token, ±{self.band_ttft:.0%} on time "
                f"to first token: 9 in 10 of {self.checked_serving} published Trn1/Inf2 serving rows (Neuron SDK "
                f"docs, retrieved {self.retrieved}) fall within them")


@functools.lru_cache(maxsize=1)
def frozen() -> Constants:
    """The constants and bands shipped with neuronkit."""
    table = data_toml("cost_model.toml")
    fit, band = table["fitted"], table["band"]
    return Constants(compute_fraction=fit["compute_fraction"], hbm_fraction=fit["hbm_fraction"],
                     collective_latency_s=fit["collective_latency_s"],
                     prefill_compute_fraction=fit["prefill_compute_fraction"], band_training=band["training"],
                     band_serving=band["serving"], band_ttft=band["ttft"], fitted_on=tuple(fit["rows"]),
                     checked_training=band["training_rows"], checked_serving=band["serving_rows"],
                     retrieved=table["retrieved"], parameters_checked=tuple(band["parameters"]))
