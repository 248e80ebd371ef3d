"""Findings on upstream client paths (neuronkit/data/client_paths.toml): faithful failures of released clients
(Diffusers, accelerate) on the device, each with its source and remedy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from neuronkit.resources import data_toml


@dataclass(frozen=True)
class ClientFinding:
    """One client path that fails on the device, why, and what to do instead."""

    client: str
    key: str
    path: str
    finding: str
    why: str
    match: str
    severity: str
    source: str
    remedy: str

    def line(self) -> str:
        """One line for a report or the command line."""
        return f"{self.client} ({self.path}): {self.finding}. Remedy: {self.remedy}"


@cache
def all_findings() -> tuple[ClientFinding, ...]:
    """Every row of the table, in its order."""
    rows = data_toml("client_paths.toml")["path"]
    return tuple(ClientFinding(**row) for row in rows)


def find(client: str, key: str) -> ClientFinding:
    """The finding `key` of `client`; KeyError when the table has none."""
    for finding in all_findings():
        if (finding.client, finding.key) == (client, key):
            return finding
    raise KeyError(f"no client finding {client}/{key}")


def explain(error: BaseException) -> ClientFinding | None:
    """The finding whose error `error` is, or None (a finding with no `match` raises nothing: e.g. a hang)."""
    text = str(error)
    return next((f for f in all_findings() if f.match and re.search(f.match, text)), None)
