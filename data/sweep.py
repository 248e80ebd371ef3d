"""The architecture sweep: every architecture in transformers' AutoModel mappings, built from a tiny config
on the CPU, through the op audit and the staged check, each ending in a verdict.

An entry is a model type with the class a team most likely brings (its first task in `PRIMARY_ORDER`), and,
so that every task class is exercised, a few more model types per task with that task's class
(`TASK_SAMPLE`, and the table's `[named]` ones). Its config is the model type's default config shrunk by `data/sweep.toml` (no hub, no
weights: the checkpoint directory holds config.json only and runs on random weights). Each entry ends in
one of:

  pass          the audit finds no blocker and every check stage passes or warns
  finding       a named finding with its source: an audit blocker or a check stage the device refused
                (categories of neuronkit/data/op_support.toml, each citing where the behaviour is documented)
  refused       neuronkit declines the model in one line (a multimodal model, inputs it cannot make)
  cannot build  the tiny config does not build on the CPU (the reason: a missing optional library, a
                config class that refuses its shrunk defaults, a model still too large)
  error         anything else: a traceback, which the sweep's tests fail on

`data/sweep_outcomes.toml` records each entry's outcome; `tests/sweep/` holds every entry to it
(`make test-zoo`). Usage: ``python data/sweep.py [--record] [ENTRY ...]`` runs the named entries (default:
all) and prints one line each; `--record` writes their outcomes into the record.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tomllib
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # not when a test imports it: its environment is inherited by subprocesses
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402
from transformers.models.auto import modeling_auto  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

DATA = Path(__file__).resolve().parent
TABLE_FILE = DATA / "sweep.toml"
RECORD_FILE = DATA / "sweep_outcomes.toml"
# The class a model type is swept with: its first task here that transformers maps it in (the heads with a
# loss first, the base model last), as the mapping each task reads.
PRIMARY_ORDER: dict[str, str] = {
    "causal_lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked_lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "seq2seq_lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "speech_seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
    "image_classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "audio_classification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "sequence_classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "token_classification": "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
    "question_answering": "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
    "multiple_choice": "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES",
    "pretraining": "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
    "next_sentence_prediction": "MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES",
    "base": "MODEL_MAPPING_NAMES",
}
# Model types swept a second time per task with that task's class (the first ones, alphabetically, whose
# primary class has another task): every task class runs on several architectures.
TASK_SAMPLE = 6
# The check stages each entry runs (compile: a sample, `tests/sweep`), on one training step and one timing run.
STAGES = ("cpu", "eager", "generate", "train")
OUTCOMES = ("pass", "finding", "refused", "cannot build", "error")


class CannotBuild(Exception):
    """The tiny config does not build on the CPU (the message says why)."""


@dataclass(frozen=True)
class Entry:
    """One architecture of the sweep: a model type and the class it runs as."""

    model_type: str
    architecture: str
    task: str
    primary: bool = True

    @property
    def name(self) -> str:
        return self.model_type if self.primary else f"{self.model_type}:{self.task}"


@dataclass(frozen=True)
class Outcome:
    """How an entry ended: one of OUTCOMES and its detail (the finding categories, the line, the reason)."""

    kind: str
    detail: str = ""

    def __str__(self) -> str:
        return self.kind + (f": {self.detail}" if self.detail else "")

    @classmethod
    def parse(cls, text: str) -> Outcome:
        kind, _, detail = text.partition(": ")
        return cls(kind, detail)


def table() -> dict[str, Any]:
    with TABLE_FILE.open("rb") as fh:
        return tomllib.load(fh)


def _first(names: Any) -> str:
    return names[0] if isinstance(names, (list, tuple)) else names


def entries() -> dict[str, Entry]:
    """Every entry of the sweep by name: each model type of transformers' AutoModel mapping once, then
    TASK_SAMPLE more per task."""
    mappings = {task: getattr(modeling_auto, name) for task, name in PRIMARY_ORDER.items()}
    found: dict[str, Entry] = {}
    for model_type in sorted(modeling_auto.MODEL_MAPPING_NAMES):
        task = next(t for t, mapping in mappings.items() if model_type in mapping)
        found[model_type] = Entry(model_type, _first(mappings[task][model_type]), task)
    for task, mapping in mappings.items():
        others = [t for t in sorted(mapping) if t in found and found[t].task != task]
        for model_type in others[:TASK_SAMPLE]:
            entry = Entry(model_type, _first(mapping[model_type]), task, primary=False)
            found[entry.name] = entry
    for model_type, task in table()["named"].items():  # the data table's own picks
        if model_type in mappings[task] and found[model_type].task != task:
            entry = Entry(model_type, _first(mappings[task][model_type]), task, primary=False)
            found[entry.name] = entry
    return found


def tiny_config(entry: Entry) -> PretrainedConfig:
    """The model type's default config shrunk by the sweep table (its caps, else the first of its variants)
    to one whose model builds within the table's size and trains a step on the CPU on its example inputs;
    refused with CannotBuild (the first attempt's reason) when none does. A NeuronkitInputError (no example
    inputs for the model) is raised as it is."""
    rules = table()
    reasons = []
    for variant in [{}, *rules.get("variant", [])]:
        caps = {**rules["cap"], **variant}
        try:
            config = _built(entry, rules, caps)
            _trains_on_cpu(config)
            return config
        except CannotBuild as exc:
            reasons.append(str(exc))
    raise CannotBuild(reasons[0])


def _built(entry: Entry, rules: dict[str, Any], caps: dict[str, Any]) -> PretrainedConfig:
    """The shrunk config, once its model builds (on the meta device) within the table's size."""
    cls = CONFIG_MAPPING[entry.model_type]
    try:
        settings = _shrunk(cls, rules, caps) | rules["override"].get(entry.model_type, {})
        config = cls(**settings)
        config.architectures = [entry.architecture]
        model_cls = getattr(transformers, entry.architecture)
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            model = model_cls._from_config(config)
    except Exception as exc:  # noqa: BLE001 - any failure to build is the entry's reason
        raise CannotBuild(_one_line(exc)) from None
    count = sum(p.numel() for p in model.parameters())
    if count > rules["max_parameters"]:
        raise CannotBuild(f"{count / 1e6:.1f}M parameters once shrunk (the sweep's limit: "
                          f"{rules['max_parameters'] / 1e6:.0f}M): a size key data/sweep.toml does not shrink")
    return config


def _trains_on_cpu(config: PretrainedConfig) -> None:
    """One training step's forward and backward of the model on the CPU, on neuronkit's example inputs: what
    the sweep's runs build on. CannotBuild when the model's own code raises (a config the tiny sizes leave
    inconsistent, inputs it needs that neuronkit does not make)."""
    from neuronkit import inputs, models
    from neuronkit.pipeline.session import forward_extras
    from neuronkit.graph_compile.compare import loss_of

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = models.model_class(config)._from_config(config).train()
        batch = inputs.example_inputs(config)  # NeuronkitInputError: no inputs for this model, raised as it is
        try:
            for extra in ({}, forward_extras(model)):  # as the audit calls it, and as the check stages do
                loss_of(model(**batch, **extra)).backward()
        except Exception as exc:  # noqa: BLE001 - the model's own code, on the CPU
            raise CannotBuild(f"the tiny model does not train on the CPU: {type(exc).__name__}: {_one_line(exc)} "
                              f"at {_where(exc)}") from None


def _shrunk(cls: type[PretrainedConfig], rules: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments that make `cls` tiny: capped sizes, shrunk per-stage lists, per-layer lists cut to the
    new depth (keeping one layer of each kind), rotary sections that fit the new heads, token ids in the
    vocabulary; and the same for each sub-config."""
    default = cls()
    stored = default.to_dict()
    lists, flat = rules["lists"], rules["flat_lists"]
    vocab = caps["vocab_size"]
    settings: dict[str, Any] = {}
    for key, value in stored.items():
        if key in caps and isinstance(value, int) and not isinstance(value, bool):
            settings[key] = min(value, caps[key]) if key != "image_size" else caps[key]
        elif key == "image_size" and isinstance(value, list):  # (height, width)
            settings[key] = [caps[key]] * len(value)
        elif key in lists and isinstance(value, list) and all(isinstance(v, int) for v in value):
            settings[key] = [min(v, lists[key] * 2 ** i) if key != "depths" else min(v, 1) for i, v in enumerate(value)]
        elif key in flat and isinstance(value, list) and all(isinstance(v, int) for v in value):
            settings[key] = [min(v, flat[key]) for v in value]
        elif key.endswith("_token_id") and isinstance(value, int) and value >= vocab:
            settings[key] = vocab - 1 - len(settings) % 8  # a distinct id near the end of the vocabulary
        elif key.endswith("_token_id") and isinstance(value, list):
            settings[key] = [v if v < vocab else vocab - 1 for v in value if isinstance(v, int)]
    if stored.get("is_encoder_decoder") and stored.get("decoder_start_token_id") is None:
        # published encoder-decoder checkpoints name the token their decoder starts from (T5's: the pad token);
        # some default configs leave it out, and generate() cannot start without it
        settings["decoder_start_token_id"] = settings.get("pad_token_id", stored.get("pad_token_id")) or 0
    depth = {stored[k]: settings[k] for k in ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
             if isinstance(stored.get(k), int) and k in settings}
    for key, value in stored.items():
        if isinstance(value, list) and len(value) in depth and depth[len(value)] < len(value) and key not in settings:
            settings[key] = _fewer_layers(value, depth[len(value)])
    heads = max(settings.get("num_attention_heads", 1), 1)
    head_dim = settings.get("head_dim") or settings.get("hidden_size", 0) // heads
    for key in ("rope_parameters", "rope_scaling"):
        if isinstance(stored.get(key), dict) and isinstance(stored[key].get("mrope_section"), list) and head_dim:
            settings[key] = {**stored[key], "mrope_section": _sections(stored[key]["mrope_section"], head_dim // 2)}
    for name in getattr(cls, "sub_configs", {}):
        value = getattr(default, name, None)
        if isinstance(value, PretrainedConfig):
            sub = {k: v for k, v in value.to_dict().items() if not isinstance(v, list)}  # lists: from the sizes
            settings[name] = {**sub, **_shrunk(type(value), rules, caps)}
    return settings


def _fewer_layers(kinds: list[Any], count: int) -> list[Any]:
    """A per-layer list cut to `count` layers, with each kind of layer it had kept once while room allows
    (Qwen3-Next's [linear, linear, linear, full, ...] -> [linear, full])."""
    cut = list(kinds[:count])
    missing = [k for k in dict.fromkeys(kinds) if k not in cut]
    for i, kind in enumerate(missing[:count - 1]):
        cut[count - 1 - i] = kind
    return cut


def _sections(sections: list[int], total: int) -> list[int]:
    """Rotary sections (time, height, width) scaled to sum to `total`."""
    scale = total / max(sum(sections), 1)
    scaled = [max(1, int(s * scale)) for s in sections]
    scaled[0] += total - sum(scaled)
    return scaled


def run(entry: Entry, folder: Path) -> Outcome:
    """Sweep one entry in `folder`: its tiny checkpoint (config.json), the op audit with backward, and the
    check stages on random weights."""
    import neuronkit
    from neuronkit.errors import NeuronkitInputError

    try:
        config = tiny_config(entry)
    except CannotBuild as exc:
        return Outcome("cannot build", str(exc))
    except NeuronkitInputError as exc:
        return Outcome("refused", _one_line(exc))
    path = folder / entry.name.replace(":", "-")
    path.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(path)
    try:
        audit = neuronkit.audit(path, backward=True)
        report = neuronkit.check(path, stages=STAGES, random_weights=True, timing_runs=1, train_steps=1)
    except NeuronkitInputError as exc:
        return Outcome("refused", _one_line(exc))
    except Exception as exc:  # noqa: BLE001 - a traceback: the sweep's tests fail on it
        return Outcome("error", f"{type(exc).__name__}: {_one_line(exc)} at {_where(exc)}")
    return verdict(audit, report)


def verdict(audit: Any, report: Any) -> Outcome:
    """pass, a finding (the audit's blocker categories, the refusals the check stages explained), or an
    error (a stage that raised with no finding to explain it, a stage that failed)."""
    findings = sorted({b.category for b in audit.summary.blockers})
    for stage in report.stages:
        if stage.status == "error":
            category = _category(stage.summary)
            if category is None:
                return Outcome("error", f"{stage.stage}: {stage.summary[:300]}")
            findings.append(category)
        elif stage.status == "fail":
            return Outcome("error", f"{stage.stage} failed: {stage.summary[:300]}")
    return Outcome("finding", ", ".join(dict.fromkeys(findings))) if findings else Outcome("pass")


def _category(summary: str) -> str | None:
    """The finding category an explained stage error names (`... [category]. remedy`)."""
    if "[" not in summary or "]" not in summary:
        return None
    return summary[summary.rindex("[") + 1:summary.rindex("]")] or None


def record() -> dict[str, Outcome]:
    """The recorded outcome of every entry (data/sweep_outcomes.toml)."""
    if not RECORD_FILE.is_file():
        return {}
    with RECORD_FILE.open("rb") as fh:
        return {name: Outcome.parse(text) for name, text in tomllib.load(fh).items()}


def write_record(outcomes: dict[str, Outcome]) -> None:
    """Write the record, every entry of the sweep in name order (entries not swept keep their outcome)."""
    merged = record() | outcomes
    lines = ["# The architecture sweep's outcome per entry (data/sweep.py; `python data/sweep.py --record` writes it).",
             f"# transformers {transformers.__version__}, torch {torch.__version__}.", ""]
    lines += [f"{_key(name)} = {_quoted(str(merged[name]))}" for name in sorted(merged)]
    RECORD_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _key(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else _quoted(name)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _where(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"


def main(argv: list[str] | None = None) -> None:
    """Run the named entries (default: all), one line each; `--record` writes their outcomes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="ENTRY", help="entries to run (default: all)")
    parser.add_argument("--out", type=Path, default=DATA.parent / "build" / "sweep", help="checkpoint folder")
    parser.add_argument("--record", action="store_true", help=f"write the outcomes into {RECORD_FILE.name}")
    args = parser.parse_args(argv)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    everything = entries()
    unknown = sorted(set(args.names) - set(everything))
    if unknown:
        raise SystemExit(f"sweep: unknown entr{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}")
    outcomes = {}
    for name in args.names or everything:
        start = time.perf_counter()
        outcomes[name] = outcome = run(everything[name], args.out)
        print(f"{name:<36} {time.perf_counter() - start:5.1f}s  {outcome}", flush=True)
    if args.record:
        write_record(outcomes)


if __name__ == "__main__":
    main(sys.argv[1:])
