"""Shape buckets: how many compilations varying input lengths cause, and padding that bounds them.

The `neuron` backend compiles static shapes only and recompiles for every new shape (behaviour doc §3),
so serving prompts of 40 distinct lengths means 40 compilations. Padding each input up to the nearest of
a few bucket lengths bounds that number at the cost of extra (padding) tokens. This module counts the
compilations the observed lengths would cause and proposes buckets two ways: powers of two, and the
buckets that minimise padding for a given bucket count (dynamic programming over the observed lengths).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from bisect import bisect_left, bisect_right
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

from neuronkit.errors import NeuronkitInputError
from neuronkit.evidence import BucketPlan, Bucketing, fields_of
from neuronkit.resources import data_dir


def suggest_buckets(lengths: Iterable[int], max_buckets: int = 4, *, multiple_of: int = 1,
                    max_length: int | None = None) -> BucketPlan:
    """Propose padding buckets for input lengths (e.g. token counts of sample prompts).

    `max_buckets` bounds the compilations; `multiple_of` rounds bucket lengths up (hardware-friendly
    tiles); `max_length` (the model's context) caps the largest bucket and rejects longer inputs."""
    values = sorted(_check_lengths(lengths, max_length))
    if isinstance(max_buckets, bool) or not isinstance(max_buckets, int) or max_buckets < 1:
        raise NeuronkitInputError(f"max_buckets must be a positive integer, got {max_buckets!r}")
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of < 1:
        raise NeuronkitInputError(f"multiple_of must be a positive integer, got {multiple_of!r}")
    optimal = _bucketing("min_padding", _min_padding_buckets(values, max_buckets, multiple_of, max_length), values)
    pow2 = _bucketing("pow2", _pow2_buckets(values, multiple_of, max_length), values)
    candidates = [optimal] + ([pow2] if pow2.compilations <= max_buckets else [])
    recommended = min(candidates, key=lambda b: (b.padded_tokens, b.compilations))
    return BucketPlan(**fields_of(recommended, Bucketing), lengths=values, distinct_shapes=len(set(values)),
                      total_tokens=sum(values), max_buckets=max_buckets,
                      alternatives=[b for b in (optimal, pow2) if b is not recommended])


def sample_lengths(tokenizer: Any, prompts: Sequence[str] | str | Path | None = None) -> list[int]:
    """Token counts of prompts under `tokenizer` (default: the bundled `data/sample_prompts.txt`)."""
    if prompts is None or isinstance(prompts, (str, Path)):
        path = Path(prompts) if prompts is not None else data_dir() / "sample_prompts.txt"
        prompts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not prompts:
        raise NeuronkitInputError("no prompts to measure")
    return [len(ids) for ids in tokenizer(list(prompts), add_special_tokens=True)["input_ids"]]


BUNDLED_PROMPTS = "the bundled sample prompts"


def prompts_source(prompts: Sequence[str] | str | Path | None) -> str:
    """Where bucket advice's lengths come from, in words: `the bundled sample prompts` (the same for every
    model), `your prompts.txt` (a file, by name) or `your N prompts` (a list)."""
    if prompts is None:
        return BUNDLED_PROMPTS
    if isinstance(prompts, (str, Path)):
        return f"your {Path(prompts).name}"
    return f"your {len(prompts)} prompts"


def advise_buckets(tokenizer: Any, config: Any, prompts: Sequence[str] | str | Path | None = None,
                   max_buckets: int = 4) -> BucketPlan | None:
    """Bucket advice for a model: the token lengths of `prompts` (default: the bundled sample prompts),
    each capped at the model's `max_position_embeddings`, labelled with their source; None when the model
    has no tokenizer."""
    if tokenizer is None:
        return None
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    limit = getattr(text_config, "max_position_embeddings", None)
    lengths = sample_lengths(tokenizer, prompts)
    lengths = [min(n, limit) for n in lengths] if limit else lengths
    return dataclasses.replace(suggest_buckets(lengths, max_buckets, max_length=limit),
                               source=prompts_source(prompts))


def _check_lengths(lengths: Iterable[int], max_length: int | None) -> list[int]:
    values = list(lengths)
    if not values:
        raise NeuronkitInputError("suggest_buckets needs at least one input length")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise NeuronkitInputError(f"input lengths must be positive integers, got {bad[:3]!r}")
    if max_length is not None and max(values) > max_length:
        raise NeuronkitInputError(f"input length {max(values)} exceeds max_length {max_length}")
    return values


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _capped(length: int, cap: int | None) -> int:
    return length if cap is None else min(length, cap)


def _pow2_buckets(values: list[int], multiple_of: int, cap: int | None) -> list[int]:
    """The powers of two the inputs need (rounded up to `multiple_of`, the last one capped)."""
    return sorted({_capped(_round_up(1 << (v - 1).bit_length(), multiple_of), cap) for v in values})


def _min_padding_buckets(values: list[int], max_buckets: int, multiple_of: int, cap: int | None) -> list[int]:
    """At most `max_buckets` bucket lengths minimising padded tokens: exact dynamic programming over the
    candidate edges (the observed lengths rounded up to `multiple_of`); the last edge covers the longest."""
    edges = sorted({_capped(_round_up(v, multiple_of), cap) for v in values})
    # inputs[i], tokens[i]: how many inputs, and their tokens, fit under edges[i]
    inputs = [bisect_right(values, edge) for edge in edges]
    prefix = [0, *itertools.accumulate(values)]
    tokens = [prefix[n] for n in inputs]

    def padding(lo: int, hi: int) -> int:  # inputs above edges[lo] (none when lo < 0) padded to edges[hi]
        below_n, below_t = (inputs[lo], tokens[lo]) if lo >= 0 else (0, 0)
        return (inputs[hi] - below_n) * edges[hi] - (tokens[hi] - below_t)

    k = min(max_buckets, len(edges))
    best = [[math.inf] * len(edges) for _ in range(k + 1)]  # best[b][hi]: b buckets, the last at edges[hi]
    back = [[-1] * len(edges) for _ in range(k + 1)]
    for hi in range(len(edges)):
        best[1][hi] = padding(-1, hi)
    for b in range(2, k + 1):
        for hi in range(b - 1, len(edges)):
            for lo in range(b - 2, hi):
                value = best[b - 1][lo] + padding(lo, hi)
                if value < best[b][hi]:
                    best[b][hi], back[b][hi] = value, lo
    last = len(edges) - 1
    b = min(range(1, k + 1), key=lambda i: (best[i][last], i))
    chosen, hi = [], last
    while b >= 1:
        chosen.append(edges[hi])
        hi, b = back[b][hi], b - 1
    return sorted(chosen)


def _bucketing(strategy: str, buckets: list[int], values: list[int]) -> Bucketing:
    counts = Counter(buckets[bisect_left(buckets, v)] for v in values)
    padded = sum(bucket * n for bucket, n in counts.items())
    total = sum(values)
    return Bucketing(strategy=strategy, buckets=buckets, compilations=len(counts), padded_tokens=padded,
                     padding_overhead=round(100.0 * (padded - total) / total, 2),
                     counts={b: counts[b] for b in buckets if counts[b]})

