"""The llama3 debug model's tokenizer and dataset, made offline.

torchtitan's `llama3_debugmodel` reads `./tests/assets/tokenizer` and the `c4_test` dataset from a torchtitan
checkout (neither ships in the wheel), and the session is offline (HF_HUB_OFFLINE=1). Both are made here from
neuronkit's bundled prompts, deterministically: a byte-level BPE tokenizer (vocabulary within the debug model's
2,048 embeddings) and a JSON-lines dataset of 200 documents in c4's `{"text": ...}` form.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from neuronkit.resources import data_dir

VOCAB_SIZE = 2000  # under the debug model's 2,048 embeddings
DOCUMENTS = 200
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


@dataclass(frozen=True)
class Assets:
    """Where `write` put the tokenizer (`--hf_assets_path`) and the dataset (`--dataloader.dataset_path`)."""

    tokenizer: Path
    dataset: Path


def write(directory: str | Path) -> Assets:
    """Write the tokenizer and the dataset under `directory` (made if missing) and say where they are."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    root = Path(directory)
    assets = Assets(root / "tokenizer", root / "c4_test")
    prompts = (data_dir() / "sample_prompts.txt").read_text().splitlines()
    rng = random.Random(0)
    documents = [" ".join(rng.sample(prompts, 4)) for _ in range(DOCUMENTS)]
    assets.dataset.mkdir(parents=True, exist_ok=True)
    (assets.dataset / "data.json").write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(documents, trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=[BOS, EOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    assets.tokenizer.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(assets.tokenizer / "tokenizer.json"))
    (assets.tokenizer / "tokenizer_config.json").write_text(json.dumps({"bos_token": BOS, "eos_token": EOS}))
    return assets
