"""The eager NEFF cache: one compiled artefact per distinct (op, shapes, dtypes, static args).

The real backend lowers every op to StableHLO, compiles it with neuronx-cc into a NEFF and caches it in
memory and on disk, keyed by sha256(sha256(HLO) ":" sha256(compiler config)) (behaviour doc §2). The
simulator keys the same way on the op signature, keeps statistics and persists one small record per key
under TORCH_NEURONX_NEFF_CACHE_DIR (default <tmp>/neff_cache, sharded ab/cd/<key>.neff; S:
csrc/core/cache/PersistentCacheBackend.cpp:61-65) so a second process sees disk hits as it would on
Trainium. Persistence is off with TORCH_NEURONX_NEFF_DISABLE_CACHE=1 (exactly "1": S:
PersistentCacheBackend.cpp:18,55-59) or TORCH_NEURONX_DISABLE_NEFF_CACHE=1/true/yes (S: utils.py:191-198).
The in-memory cache is LRU-bounded by NEURON_COMPILATION_CACHE_MAX_ENTRIES and
NEURON_COMPILATION_CACHE_MAX_SIZE_MB (unbounded by default; S: csrc/core/compilation/
CompilationCache.cpp:14-38, CompilationCache.h:39-44).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from neuronkit import env
from neuronkit.device.simulator import neuron_log

log = logging.getLogger("neuronkit.neff_cache")
COMPILER_CONFIG = "neuronx-cc --target=trn2 --optlevel=2 --model-type=transformer (simulated)"
_CONFIG_DIGEST = hashlib.sha256(COMPILER_CONFIG.encode()).hexdigest()


def _limit(variable: str, unit: int) -> int:
    """A cache limit from the environment in its unit (0: unbounded, the source's default)."""
    return env.whole(variable, 0) * unit


class NeffCache:
    """In-memory + persistent cache statistics for eager per-op compilation."""

    def __init__(self) -> None:
        self.memory: dict[tuple, str] = {}
        self.hits = 0  # in-memory hits
        self.disk_hits = 0
        self.misses = 0  # compilations
        self.compile_ns = 0
        self.evictions = 0
        self.max_entries = _limit("NEURON_COMPILATION_CACHE_MAX_ENTRIES", 1)
        self.max_bytes = _limit("NEURON_COMPILATION_CACHE_MAX_SIZE_MB", 1 << 20)
        self.bytes = 0
        disabled = env.flag("TORCH_NEURONX_NEFF_DISABLE_CACHE") or env.flag(
            "TORCH_NEURONX_DISABLE_NEFF_CACHE", true=("1", "true", "yes"))
        default_dir = Path(tempfile.gettempdir()) / "neff_cache"
        self.directory: Path | None = None if disabled else Path(
            env.text("TORCH_NEURONX_NEFF_CACHE_DIR", str(default_dir)))

    def lookup(self, signature: tuple) -> tuple[str, bool]:
        """The cache key for an op signature and whether it was already compiled."""
        key = self.memory.get(signature)
        if key is not None:
            self.hits += 1
            if self.max_entries or self.max_bytes:  # LRU order: most recently used last
                self.memory[signature] = self.memory.pop(signature)
            return key, True
        start = time.perf_counter_ns()
        hlo = repr(signature)
        key = hashlib.sha256(f"{hashlib.sha256(hlo.encode()).hexdigest()}:{_CONFIG_DIGEST}".encode()).hexdigest()
        self.memory[signature] = key
        self.bytes += len(hlo)  # the simulated NEFF's size: its record
        self._evict()
        hit = self._persist(key, signature)
        self.compile_ns += time.perf_counter_ns() - start
        return key, hit

    def _evict(self) -> None:
        """Drop least recently used entries past the entry or size limit."""
        while len(self.memory) > 1 and ((self.max_entries and len(self.memory) > self.max_entries)
                                        or (self.max_bytes and self.bytes > self.max_bytes)):
            oldest = next(iter(self.memory))
            del self.memory[oldest]
            self.bytes -= len(repr(oldest))
            self.evictions += 1

    def _persist(self, key: str, signature: tuple) -> bool:
        if self.directory is None:
            self.misses += 1
            return False
        path = self.directory / key[:2] / key[2:4] / f"{key}.neff"
        if path.exists():
            self.disk_hits += 1
            neuron_log.log(neuron_log.INFO, f"[NEFF_CACHE] Cache HIT for key: {key}")
            return True
        self.misses += 1
        neuron_log.log(neuron_log.INFO, f"[NEFF_CACHE] Cache MISS for key: {key}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"simulated": True, "signature": repr(signature), "config": COMPILER_CONFIG}))
            tmp.replace(path)
            neuron_log.log(neuron_log.INFO, f"[NEFF_CACHE] Storing NEFF for key: {key}")
        except OSError as exc:  # a read-only or full disk degrades to an in-memory cache
            log.warning("NEFF cache not persisted (%s); continuing in memory", exc)
        return False

    def stats(self) -> dict[str, object]:
        """hits, disk_hits, misses, entries, compile seconds and where the cache lives."""
        return {
            "hits": self.hits,
            "disk_hits": self.disk_hits,
            "misses": self.misses,
            "entries": len(self.memory),
            "evictions": self.evictions,
            "compile_s": self.compile_ns / 1e9,
            "directory": str(self.directory) if self.directory else None,
        }

    def clear(self) -> None:
        """Forget the in-memory cache and statistics (the persistent cache stays)."""
        self.memory.clear()
        self.hits = self.disk_hits = self.misses = self.compile_ns = self.evictions = self.bytes = 0
