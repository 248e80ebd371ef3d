"""Which hourly price an estimate is in dollars of: one AWS published (on-demand or reserved), or the
team's own (`--usd-per-hour`). An instance with no published price gets no dollar figure, never a guess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronkit.errors import NeuronkitInputError
from neuronkit.planner.instances import PRICE_KINDS, Instance


@dataclass(frozen=True, slots=True)
class Pricing:
    """One instance's hourly price (None: none published), and where it comes from."""

    instance: str
    usd_per_instance_hour: float | None
    source: str  # a citation, or why there is no price

    @classmethod
    def of(cls, inst: Instance, kind: str = "on_demand", usd_per_hour: float | None = None) -> "Pricing":
        """The price of `kind` AWS published for `inst`, or the team's own rate when given."""
        if usd_per_hour is not None:
            if not usd_per_hour > 0:
                raise NeuronkitInputError(f"--usd-per-hour must be a positive price, got {usd_per_hour}")
            return cls(inst.name, usd_per_hour, f"${usd_per_hour:,.3f}/h per {inst.name}, as given (--usd-per-hour)")
        if kind not in PRICE_KINDS:
            raise NeuronkitInputError(f"unknown price kind {kind!r}; known: {', '.join(PRICE_KINDS)}")
        price = inst.price(kind)
        if price is None:
            other = [p.describe() for p in inst.prices.values()]
            why = (f"no {kind.replace('_', '-')} price published for {inst.name}"
                   + (f" (published: {'; '.join(other)})" if other else "; give your rate with --usd-per-hour"))
            return cls(inst.name, None, why)
        return cls(inst.name, price.usd_per_hour, f"{inst.name}: {price.describe()}")

    def usd_per_hour(self, instances: int = 1) -> float | None:
        return None if self.usd_per_instance_hour is None else self.usd_per_instance_hour * instances

    def fields(self, usd_per_hour: float | None, usd_per_million_tokens: float | None) -> dict[str, Any]:
        return {"usd_per_hour": usd_per_hour, "usd_per_million_tokens": usd_per_million_tokens,
                "price_source": self.source}
