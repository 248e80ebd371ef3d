"""Build the bundled tiny checkpoints and sample data under ``data/``, offline and deterministically.

The workbook must run without a model hub, so every model it uses is built here from
``data/corpus.txt`` (committed, license-clean text) with fixed seeds and a single thread.

Usage: ``python data/build_bundled_models.py [--out DIR] [--skip-train]``
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Single-threaded tokenizer training, like torch.set_num_threads(1) below: one code path everywhere.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
# Build plain CPU checkpoints without loading any out-of-tree device backend (e.g. the simulated neuron).
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForMaskedLM,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.utils import logging as hf_logging  # noqa: E402

SRC_DIR = Path(__file__).resolve().parent
CORPUS = SRC_DIR / "corpus.txt"
# The models and prompts ship inside the package (package data), next to the op-support table.
PACKAGE_DATA = SRC_DIR.parent / "neuronkit" / "data"
VOCAB_SIZE = 1024
MAX_POSITIONS = 512
SEED = 0

# Causal-LM training: short, plain AdamW over random windows of the corpus token stream.
TRAIN_STEPS = 300
TRAIN_BATCH = 16
TRAIN_SEQ_LEN = 64
TRAIN_LR = 3e-3

QWEN_SPECIALS = {"pad_token": "<|pad|>", "bos_token": "<|bos|>", "eos_token": "<|endoftext|>", "unk_token": "<|unk|>"}
BERT_SPECIALS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}


def read_paragraphs(path: Path = CORPUS) -> list[str]:
    """Corpus paragraphs (blank-line separated) in file order; each is one training document."""
    blocks = path.read_text(encoding="utf-8").split("\n\n")
    return [block.strip() for block in blocks if block.strip()]


def corpus_lines(paragraphs: list[str]) -> list[str]:
    """All non-empty corpus lines (one sentence each), in file order."""
    return [line for para in paragraphs for line in para.splitlines() if line.strip()]


def build_bpe_tokenizer(lines: list[str]) -> PreTrainedTokenizerFast:
    """Byte-level BPE (the Qwen/GPT-2 scheme) trained on the corpus; any byte string encodes without UNK."""
    tok = Tokenizer(models.BPE(unk_token=QWEN_SPECIALS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=list(QWEN_SPECIALS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    # Left padding so batched generate() appends new tokens right after each prompt.
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=MAX_POSITIONS, padding_side="left", **QWEN_SPECIALS
    )


def build_wordpiece_tokenizer(lines: list[str]) -> PreTrainedTokenizerFast:
    """Lower-cased BERT WordPiece trained on the corpus, adding [CLS] ... [SEP] around each input."""
    normalizer = normalizers.BertNormalizer(lowercase=True)
    tok = Tokenizer(models.WordPiece(unk_token=BERT_SPECIALS["unk_token"]))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    # WordPieceTrainer gives "##x" pieces ids in hash-map order, which changes the learned merges from
    # run to run; registering every "##x" up front (sorted) makes the ids, hence the vocab, deterministic.
    chars = sorted({c for line in lines for c in normalizer.normalize_str(line) if not c.isspace()})
    trainer = trainers.WordPieceTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=list(BERT_SPECIALS.values()) + [f"##{c}" for c in chars],
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    # Rebuild from the plain vocab so only the real specials are special (the "##x" pieces are ordinary).
    wordpiece = Tokenizer(models.WordPiece(vocab=tok.get_vocab(), unk_token=BERT_SPECIALS["unk_token"]))
    wordpiece.normalizer = normalizer
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(t, wordpiece.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    return PreTrainedTokenizerFast(tokenizer_object=wordpiece, model_max_length=MAX_POSITIONS, **BERT_SPECIALS)


def tiny_qwen3_config(tokenizer: PreTrainedTokenizerFast) -> Qwen3Config:
    """A real Qwen3 architecture shrunk to ~0.14M parameters (GQA: 4 query heads, 2 KV heads)."""
    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def qwen3_100m_config() -> Qwen3Config:
    """A ~100M-parameter Qwen3 used by benchmarks with random weights (config only, no checkpoint)."""
    return Qwen3Config(
        vocab_size=16000,
        hidden_size=768,
        intermediate_size=2560,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},  # as in released Qwen3
        tie_word_embeddings=True,
    )


def count_parameters(config: Qwen3Config) -> int:
    """Parameter count of a Qwen3ForCausalLM built on the meta device (no memory allocated, tied weights once)."""
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    return sum(p.numel() for p in model.parameters())


def token_stream(tokenizer: PreTrainedTokenizerFast, paragraphs: list[str]) -> torch.Tensor:
    """The corpus as one id stream, each paragraph followed by EOS so the model learns where text ends."""
    ids: list[int] = []
    for para in paragraphs:
        ids += tokenizer(para)["input_ids"] + [tokenizer.eos_token_id]
    return torch.tensor(ids, dtype=torch.long)


def train_causal_lm(model: Qwen3ForCausalLM, stream: torch.Tensor) -> float:
    """Deterministic next-token training on random corpus windows; returns the final loss."""
    gen = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR, weight_decay=0.01)
    offsets = torch.arange(TRAIN_SEQ_LEN)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(TRAIN_STEPS):
        starts = torch.randint(0, len(stream) - TRAIN_SEQ_LEN, (TRAIN_BATCH,), generator=gen)
        batch = stream[starts[:, None] + offsets]
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    return loss.item()


def fresh_dir(path: Path) -> Path:
    """Empty ``path`` (so no stale file survives a rebuild) and return it."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, path: Path) -> None:
    """Write config, safetensors weights and tokenizer into a fresh directory."""
    fresh_dir(path)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)


def build_tiny_qwen3(out: Path, paragraphs: list[str], train: bool) -> None:
    """neuronkit/data/models/tiny-qwen3: Qwen3ForCausalLM + byte-level BPE, briefly trained on the corpus."""
    torch.manual_seed(SEED)  # deterministic weight init
    tokenizer = build_bpe_tokenizer(corpus_lines(paragraphs))
    model = Qwen3ForCausalLM(tiny_qwen3_config(tokenizer))
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if train:
        start = time.perf_counter()
        loss = train_causal_lm(model, token_stream(tokenizer, paragraphs))
        print(f"  trained tiny-qwen3: {TRAIN_STEPS} steps in {time.perf_counter() - start:.1f}s, final loss {loss:.3f}")
    path = out / "models" / "tiny-qwen3"
    save_model(model, tokenizer, path)
    report(path, f"{model.num_parameters():,} params, vocab {len(tokenizer)}")


def build_tiny_bert(out: Path, paragraphs: list[str]) -> None:
    """neuronkit/data/models/tiny-bert: BertForMaskedLM + WordPiece, random init with a fixed seed."""
    torch.manual_seed(SEED)  # deterministic weight init
    tokenizer = build_wordpiece_tokenizer(corpus_lines(paragraphs))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = BertForMaskedLM(config)
    path = out / "models" / "tiny-bert"
    save_model(model, tokenizer, path)
    report(path, f"{model.num_parameters():,} params, vocab {len(tokenizer)}")


def build_qwen3_100m(out: Path) -> None:
    """neuronkit/data/models/qwen3-100m/config.json only; benchmarks instantiate it with random weights."""
    config = qwen3_100m_config()
    path = fresh_dir(out / "models" / "qwen3-100m")
    config.save_pretrained(path)
    report(path, f"config only, {count_parameters(config) / 1e6:.1f}M params")


# Hand-written user prompts, 2-32 words: the bulk of a realistic prompt-length distribution.
SHORT_PROMPTS = [
    "Explain bucketing.",
    "Define warm up.",
    "Thanks, that helped.",
    "What is a NeuronCore?",
    "Hello, are you there?",
    "Summarize the migration steps.",
    "Write a haiku about compilers.",
    "Where is the compilation cache stored?",
    "Why is the first run so slow?",
    "Greedy or sampling for a support bot?",
    "Tell me a joke about padding tokens.",
    "Why does my model recompile on every request?",
    "What is the difference between throughput and latency?",
    "Give me three tips for reducing compile time.",
    "How many NeuronCores does one Trainium chip have?",
    "Convert 512 tokens to an approximate word count.",
    "Short answer: does padding change the model output?",
    "List the operations that fall back to the CPU.",
    "Continue the story: the compiler finished at midnight and",
    "How do I check that two runs produced bit-identical weights?",
    "What is tie_word_embeddings and why does it save memory?",
    "Is bfloat16 safe for a model that was trained in float32?",
    "What does model.to(device) actually do to the parameters and buffers?",
    "Can I train and serve the same checkpoint on different devices?",
    "Suggest a name for a tool that reports compile cache hits.",
    "What does grouped query attention change in the key value cache?",
    "Explain the attention mask to a new engineer in two sentences.",
    "How do I move a Hugging Face model to the neuron device?",
    "Compare the first token latency of batch size one and batch size eight.",
    "My logits differ from the CPU reference by 0.02. Is that a problem?",
    "Rewrite in a friendly tone: your job failed because the input shapes changed.",
    "Translate this error message into plain English: device mismatch between cpu and neuron.",
    "Explain data parallel training across cores as if I only know single device PyTorch.",
    "Write a Python function that pads a batch of token ids to the next bucket size.",
    "What batch size should I use for a chat service with a latency target of 200 milliseconds?",
    "Draft a short checklist for migrating a text classification model to Trainium, including accuracy checks and timing.",
    "I saved my checkpoint with torch.save. How do I convert it to safetensors so it loads on any device?",
    "Which is faster on Trainium, float32 or bfloat16 matrix math, and by roughly how much for a small transformer?",
    "Which sequence lengths should I pick as buckets if most prompts are under 100 tokens but a few reach 900?",
    "Generate a commit message for a change that adds sequence length buckets of 128, 256 and 512 tokens to the serving code.",
    "What should the migration record contain so that another engineer can repeat the work next month without asking me any questions?",
    "Please review this plan: compile once with the longest length, pad everything to it, and serve all requests from one graph. What are the costs?",
    "Describe a safe order of steps for changing precision, batch size, and sequence length during a migration, and say what to measure after each step.",
    "Explain why an operation can fall back to the CPU, how to find such operations in the report, and two common ways to remove them from a model.",
    "Our service receives prompts between 5 and 3000 tokens, with a median of 60 tokens. Propose a set of buckets, estimate how many graphs we compile, and explain the padding overhead.",
]

# Long prompts wrap pasted corpus context in an instruction: the long tail of the distribution.
LONG_TEMPLATES = [
    "Summarize the following notes in three bullet points: {context}",
    "Using only the context below, answer the question. Context: {context} Question: what should be measured after each change?",
    "Rewrite this section of the migration guide for a beginner: {context}",
    "Find any mistakes in this explanation and correct them: {context}",
    "Turn these notes into a checklist for the team: {context}",
]
LONG_WORD_TARGETS = [40, 48, 55, 60, 66, 72, 78, 85, 90, 96, 102, 108, 114, 118, 120]


def long_prompt(template: str, lines: list[str], start: int, target_words: int) -> str:
    """Fill ``template`` with consecutive corpus lines from ``start`` while staying within ``target_words``."""
    budget = target_words - len(template.split())
    context: list[str] = []
    for line in lines[start:] + lines[:start]:
        if context and len(" ".join(context + [line]).split()) > budget:
            break
        context.append(line)
    return template.format(context=" ".join(context))


def sample_prompts(lines: list[str]) -> list[str]:
    """~60 prompts, 2 to ~120 words, in a seeded shuffled order (like real arrival order)."""
    rng = random.Random(SEED)
    prompts = list(SHORT_PROMPTS)
    for i, target in enumerate(LONG_WORD_TARGETS):
        template = LONG_TEMPLATES[i % len(LONG_TEMPLATES)]
        prompts.append(long_prompt(template, lines, rng.randrange(len(lines)), target))
    rng.shuffle(prompts)
    return prompts


def write_sample_prompts(out: Path, paragraphs: list[str]) -> None:
    """neuronkit/data/sample_prompts.txt: one prompt per line, for shape-bucket (compilation count) advice."""
    prompts = sample_prompts(corpus_lines(paragraphs))
    path = out / "sample_prompts.txt"
    path.write_text("\n".join(prompts) + "\n", encoding="utf-8")
    words = sorted(len(p.split()) for p in prompts)
    report(path, f"{len(prompts)} prompts, {words[0]}-{words[-1]} words, median {words[len(words) // 2]}")


def size_bytes(path: Path) -> int:
    """Total size of a file or of every file under a directory."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def report(path: Path, detail: str) -> None:
    """Print what was written, its files and its size."""
    files = ", ".join(sorted(f.name for f in path.iterdir())) if path.is_dir() else path.name
    print(f"wrote {path} ({size_bytes(path) / 1024:.1f} KiB; {detail}): {files}")


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DATA,
                        help="output directory (default: the package's neuronkit/data/)")
    parser.add_argument("--skip-train", action="store_true", help="save tiny-qwen3 with its seeded random init, untrained")
    return parser.parse_args()


def main() -> None:
    """Build everything into ``--out``."""
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    hf_logging.disable_progress_bar()
    paragraphs = read_paragraphs()
    args.out.mkdir(parents=True, exist_ok=True)
    build_tiny_qwen3(args.out, paragraphs, train=not args.skip_train)
    build_tiny_bert(args.out, paragraphs)
    build_qwen3_100m(args.out)
    write_sample_prompts(args.out, paragraphs)


if __name__ == "__main__":
    main()
