"""Build the architecture zoo: one tiny random checkpoint per family in ``data/zoo.toml``, offline.

Each checkpoint is what a team would bring: ``config.json`` naming its own architecture, safetensors
weights (seeded random init), and the tokenizer, image processor or feature extractor its inputs come
from. Tokenizers are copied from the bundled models in ``neuronkit/data/models``; nothing is downloaded.

Usage: ``python data/build_zoo.py [--out DIR] [NAME ...]`` (default ``build/zoo``, every entry).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # not when a test imports it: its environment is inherited by subprocesses
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Plain CPU checkpoints: no out-of-tree device backend (e.g. the simulated neuron) is needed to build them.
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoTokenizer,
    ConvNextImageProcessorPil,
    ViTImageProcessorPil,
    WhisperFeatureExtractor,
)
from transformers.utils import logging as hf_logging  # noqa: E402

DATA = Path(__file__).resolve().parent
ZOO_FILE = DATA / "zoo.toml"
DEFAULT_OUT = DATA.parent / "build" / "zoo"
SEED = 0
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# Whisper's feature extractor: 16 kHz audio cut into 10 ms hops; one 0.32 s chunk gives the 32 frames a
# tiny encoder with max_source_positions 16 takes (its two convolutions halve the frames once).
AUDIO_HOP = 160


def recipes(path: Path = ZOO_FILE) -> dict[str, dict[str, Any]]:
    """The zoo's entries by name, as `data/zoo.toml` lists them."""
    with path.open("rb") as fh:
        return tomllib.load(fh)


def build(name: str, recipe: dict[str, Any], out: Path) -> Path:
    """Write checkpoint `name` into `out/name` (emptied first) and return its directory."""
    path = out / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    settings = dict(recipe["config"])
    model_type = settings.pop("model_type")
    tokenizer = None
    if "tokenizer" in recipe:
        source = DATA.parent / "neuronkit" / "data" / "models" / recipe["tokenizer"]
        for file in TOKENIZER_FILES:
            shutil.copy(source / file, path / file)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        settings |= _token_ids(model_type, tokenizer)
    config = AutoConfig.for_model(model_type, architectures=[recipe["architecture"]], **settings)
    torch.manual_seed(SEED)
    model = getattr(transformers, recipe["architecture"])(config).eval()
    if model.can_generate() and tokenizer is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path, safe_serialization=True)
    processor = recipe.get("processor")
    if processor == "image":
        size = config.image_size
        if config.model_type == "convnext":  # resized so the shortest edge is `size`, then center-cropped
            ConvNextImageProcessorPil(size={"shortest_edge": size}).save_pretrained(path)
        else:
            ViTImageProcessorPil(size={"height": size, "width": size}).save_pretrained(path)
    elif processor == "audio":
        frames = 2 * config.max_source_positions
        with warnings.catch_warnings():  # a tiny mel filterbank leaves some filters empty: harmless here
            warnings.simplefilter("ignore", UserWarning)
            extractor = WhisperFeatureExtractor(feature_size=config.num_mel_bins, sampling_rate=frames * AUDIO_HOP,
                                                hop_length=AUDIO_HOP, chunk_length=1)
        extractor.save_pretrained(path)
    return path


def _token_ids(model_type: str, tokenizer: Any) -> dict[str, int]:
    """Special token ids for the config, from the copied tokenizer (its vocabulary sizes the embeddings)."""
    pad = tokenizer.pad_token_id
    ids = {"vocab_size": len(tokenizer), "pad_token_id": pad}
    if tokenizer.eos_token_id is not None:
        ids["eos_token_id"] = tokenizer.eos_token_id
    if tokenizer.bos_token_id is not None:
        ids["bos_token_id"] = tokenizer.bos_token_id
    if model_type == "t5":
        ids["decoder_start_token_id"] = pad  # T5's convention: the decoder starts from the pad token
    elif model_type == "whisper":
        ids["decoder_start_token_id"] = tokenizer.bos_token_id
    return ids


def build_zoo(out: Path = DEFAULT_OUT, names: list[str] | None = None) -> dict[str, Path]:
    """Build the named entries (default: all) under `out`; returns each checkpoint's directory."""
    entries = recipes()
    unknown = sorted(set(names or ()) - set(entries))
    if unknown:
        raise SystemExit(f"build_zoo: unknown entr{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
                         f"known: {', '.join(entries)}")
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return {name: build(name, entries[name], out) for name in (names or entries)}


def main(argv: list[str] | None = None) -> None:
    """Build and print one line per checkpoint (size and seconds)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="entries to build (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in args.names or recipes():
        start = time.perf_counter()
        path = build_zoo(args.out, [name])[name]
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"{name:<16} {size / 1024:7.1f} KiB {time.perf_counter() - start:5.2f}s  {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
