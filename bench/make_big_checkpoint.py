"""Write a random Llama checkpoint of a real model's shape (bf16 safetensors shards), shard by shard.

What a team brings, without downloading one: `config.json` of Llama-3.2-1B's or Llama-3-8B's shape,
random bf16 weights in shards of at most `--shard-gb`, a `model.safetensors.index.json`, and the bundled
tiny tokenizer (its 1024 ids fit any vocabulary). Each shard is generated, written and freed before the
next, so the 8B checkpoint (16 GB) never needs more than one shard of memory. The config is marked as
random weights, so every verdict says so. Never commit the output (default `/work/bigckpt/<shape>`).

Usage: ``python bench/make_big_checkpoint.py {llama-1b,llama-8b} [--out DIR] [--shard-gb 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # plain CPU tensors: no device needed

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "neuronkit" / "data" / "models" / "tiny-qwen3"
# The published shapes (hidden size, MLP width, blocks, heads, KV heads, vocabulary, tied head).
SHAPES = {
    "llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                     num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True, head_dim=64,
                     rope_theta=500000.0, max_position_embeddings=131072),
    "llama-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, head_dim=128,
                     rope_theta=500000.0, max_position_embeddings=8192),
}


def write(shape: str, out: Path, shard_bytes: int, seed: int = 0) -> Path:
    """Write checkpoint `shape` into `out` (emptied first); returns `out`."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = LlamaConfig(architectures=["LlamaForCausalLM"], bos_token_id=1, eos_token_id=2, pad_token_id=0,
                         dtype="bfloat16", neuronkit_random_weights=True, **SHAPES[shape])
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(config)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    entries = [(name, tuple(p.shape)) for name, p in skeleton.state_dict().items() if name not in tied]
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, dims in entries:
        nbytes = 2 * int(torch.Size(dims).numel())
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, dims))
        size += nbytes
    generator = torch.Generator().manual_seed(seed)
    weight_map, total = {}, 0
    for index, shard in enumerate(shards, 1):
        file = f"model-{index:05d}-of-{len(shards):05d}.safetensors"
        tensors = {name: (torch.ones(dims) if name.endswith("norm.weight") else
                          torch.randn(dims, generator=generator) * 0.02).to(torch.bfloat16)
                   for name, dims in shard}
        save_file(tensors, str(out / file), metadata={"format": "pt"})
        total += sum(t.numel() * 2 for t in tensors.values())
        weight_map.update({name: file for name in tensors})
        del tensors
        print(f"  {file}: {len(shard)} tensors", flush=True)
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    config.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / name, out / name)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("--out", type=Path, help="checkpoint directory (default /work/bigckpt/<shape>)")
    parser.add_argument("--shard-gb", type=float, default=2.0, help="largest shard, GB (default 2)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    path = write(args.shape, args.out or Path("/work/bigckpt") / args.shape, int(args.shard_gb * 1e9))
    size = sum(f.stat().st_size for f in path.iterdir())
    print(f"{args.shape}: {size / 1e9:.2f} GB in {time.perf_counter() - start:.0f} s -> {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
