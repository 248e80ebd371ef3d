"""`neuronkit plan MODEL`: will this parallel layout fit each NeuronCore, what will it send, and what will
training or serving it cost?

Without cost options, one layout is measured with PyTorch's own parallel APIs on a fake process group
(`neuronkit.planner.plan`), with the cost estimate of that layout beside it. With `--global-batch`,
`--serve` or `--sweep`, the cost model answers alone (`neuronkit.cost`, arithmetic on the model's
parameter counts: a few seconds for a 70B config): a training layout's step time, throughput, MFU and
dollars, a serving setup's TTFT, TPOT, output tokens/s and dollars per million tokens, or (`--sweep`) every
instance and layout that fits, ranked by dollars per million tokens. Every figure is an ESTIMATE with its
band, measured against AWS's published rows (`bench/bench_cost.py`).

Exit status: 0 the layout fits (or `--sweep` found one), 1 it does not (or none fit), 2 bad input.
"""

from __future__ import annotations

import argparse
import json

from neuronkit.errors import NeuronkitInputError, require_positive_ints
from neuronkit.planner.instances import instance

_DEFAULT_INSTANCE = "trn2.48xlarge"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help="checkpoint directory, config.json, or bundled model (weights are never read)")
    parser.add_argument("--instance", default=None,
                        help=f"instance type (default {_DEFAULT_INSTANCE}; with --sweep: every instance)")
    parser.add_argument("--nodes", type=int, default=1, metavar="K", help="instances (default 1)")
    parser.add_argument("--tp", type=int, default=None, metavar="T",
                        help="tensor-parallel degree (default 1; serving: every core of the instance, at most one per "
                             "attention head)")
    parser.add_argument("--fsdp", type=int, default=None, metavar="F",
                        help="FSDP2 sharding degree (default: the cores left after tp, pp and dp)")
    parser.add_argument("--pp", type=int, default=1, metavar="P", help="pipeline stages (default 1)")
    parser.add_argument("--dp", type=int, default=1, metavar="D", help="data-parallel replicas (default 1)")
    parser.add_argument("--batch", type=int, default=None, metavar="B",
                        help="micro-batch per rank (default 1); with --serve, sequences served at once (default "
                             "1; with --sweep, the largest batch tried, default 64)")
    parser.add_argument("--seq-len", type=int, default=2048, metavar="S", help="tokens per sequence (default 2048)")
    parser.add_argument("--microbatches", type=int, default=None, metavar="M",
                        help="micro-batches per step (default: pp)")
    parser.add_argument("--dtype", default="bfloat16", help="parameter dtype (default bfloat16)")
    cost = parser.add_argument_group("cost (ESTIMATES, held to AWS's published rows)")
    cost.add_argument("--global-batch", type=int, default=None, metavar="G",
                      help="sequences per optimizer step: estimate training time and cost")
    cost.add_argument("--tokens", type=float, default=None, metavar="N",
                      help="training token budget (default 20 per parameter, Chinchilla)")
    cost.add_argument("--serve", action="store_true", help="estimate serving instead of training")
    cost.add_argument("--input-len", type=int, default=1024, metavar="I", help="serving: prompt tokens (default 1024)")
    cost.add_argument("--output-len", type=int, default=256, metavar="O",
                      help="serving: generated tokens (default 256)")
    cost.add_argument("--weights", default=None, metavar="DTYPE",
                      help="serving: weight storage dtype, e.g. int8 (default: --dtype)")
    cost.add_argument("--max-tpot-ms", type=float, default=None, metavar="MS",
                      help="serving: latency target, time per output token (default with --sweep: 50)")
    cost.add_argument("--max-ttft-ms", type=float, default=None, metavar="MS",
                      help="serving: latency target, time to first token (default with --sweep: 2000)")
    cost.add_argument("--max-days", type=float, default=None, metavar="D",
                      help="training --sweep: finish the token budget within D days (adds instances)")
    cost.add_argument("--price", choices=("on-demand", "reserved"), default="on-demand",
                      help="which published hourly price (default on-demand)")
    cost.add_argument("--usd-per-hour", type=float, default=None, metavar="USD",
                      help="your own hourly price per instance (for instances AWS publishes none for)")
    parser.add_argument("--sweep", action="store_true",
                        help="rank every instance and layout that fits by dollars per million tokens")
    parser.add_argument("--top", type=int, default=5, metavar="N", help="--sweep: how many to list (default 5)")
    parser.add_argument("--json", metavar="OUT", help="write the plan(s) as JSON to OUT ('-' for stdout)")


def run(args: argparse.Namespace) -> int:
    require_positive_ints(**{k: v for k, v in (("global_batch", args.global_batch), ("batch", args.batch),
                                               ("input_len", args.input_len), ("output_len", args.output_len),
                                               ("top", args.top)) if v is not None})
    for name in ("tokens", "max_tpot_ms", "max_ttft_ms", "max_days", "usd_per_hour"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise NeuronkitInputError(f"--{name.replace('_', '-')} must be positive, got {value:g}")
    if args.serve or args.sweep or args.global_batch is not None:
        return _cost(args)
    return _measured(args)


def _measured(args: argparse.Namespace) -> int:
    """One layout measured on the fake process group, with its cost estimate."""
    from neuronkit.cost import text, training
    from neuronkit.cost.shape import model_shape
    from neuronkit.planner.plan import plan  # after argument parsing: loads transformers

    result = plan(args.model, tp=args.tp or 1, fsdp=args.fsdp, pp=args.pp, dp=args.dp,
                  instance=args.instance or _DEFAULT_INSTANCE, nodes=args.nodes, dtype=args.dtype,
                  micro_batch=args.batch or 1, seq_len=args.seq_len, microbatches=args.microbatches)
    inst = instance(result.instance)
    try:
        shape = model_shape(args.model)
    except NeuronkitInputError as exc:  # a model the cost model does not cover: the measured plan alone
        _emit(args.json, {**result.to_dict(), "estimate": None}, f"{result.table()}\n\nno cost estimate: {exc}")
        return 0 if result.fits else 1
    est = training.estimate(shape, inst, result.layout, training.TrainingRun(
        nodes=args.nodes, micro_batch=result.micro_batch, seq_len=args.seq_len,
        global_batch=result.microbatches * result.micro_batch * result.layout.fsdp * result.layout.dp,
        dtype=result.dtype, tokens=args.tokens), pricing=_pricing(args, inst))
    document = {**result.to_dict(), "estimate": est.to_dict()["estimate"]}
    _emit(args.json, document, result.table() + "\n\n" + "\n".join(text.training(est)))
    return 0 if result.fits else 1


def _cost(args: argparse.Namespace) -> int:
    from neuronkit.cost import serving, sweep, text, training
    from neuronkit.cost.shape import model_shape
    from neuronkit.models import compute_dtype
    from neuronkit.planner.plan import resolve_layout

    shape = model_shape(args.model)
    dtype = str(compute_dtype(args.dtype)).removeprefix("torch.")
    if args.weights is not None and args.weights not in serving.WEIGHT_BYTES:
        raise NeuronkitInputError(f"--weights {args.weights!r}: one of {', '.join(serving.WEIGHT_BYTES)}")
    if args.sweep:
        choice = sweep.Choice(instances=(instance(args.instance).name,) if args.instance else (),
                              price=args.price.replace("-", "_"), usd_per_hour=args.usd_per_hour,
                              max_hours=args.max_days * 24 if args.max_days else None)
        if args.serve:
            found = sweep.serve(shape, input_len=args.input_len, output_len=args.output_len,
                                weights=args.weights or dtype, dtype=dtype, max_batch=args.batch or 64,
                                max_tpot_s=(args.max_tpot_ms or 50) / 1e3, max_ttft_s=(args.max_ttft_ms or 2000) / 1e3,
                                choice=choice)
            what = (f"serving {args.input_len} in / {args.output_len} out at TPOT ≤ {args.max_tpot_ms or 50:g} ms, "
                    f"TTFT ≤ {args.max_ttft_ms or 2000:g} ms")
        else:
            global_batch = args.global_batch or 1024
            found = sweep.train(shape, global_batch=global_batch, micro_batch=args.batch or 1,
                                seq_len=args.seq_len, dtype=dtype, tokens=args.tokens, choice=choice)
            what = f"training, {global_batch} sequences × {args.seq_len} tokens per step"
        listed = sweep.shortlist(found, args.top)
        header = f"{shape.name}: {what}, ranked by dollars per million tokens (ESTIMATES):"
        band = listed[0].checked_on if listed else ""
        # what the candidates' estimates say of themselves (a model outside the published rows' sizes), once
        notes = [f"note: {n}" for n in dict.fromkeys(n for e in listed for n in e.notes)]
        _emit(args.json, {"ranked_by": "usd_per_million_tokens", "candidates": [e.to_dict() for e in listed]},
              "\n".join([header, *text.ranking(listed), f"band: {band}", *notes]) if listed
              else f"{shape.name}: no instance and layout fits ({what})")
        return 0 if found else 1
    inst = instance(args.instance or _DEFAULT_INSTANCE)
    if args.serve:
        est = serving.estimate(shape, inst, serving.ServingRun(
            tp=args.tp, batch=args.batch or 1, input_len=args.input_len, output_len=args.output_len,
            weights=args.weights or dtype, dtype=dtype,
            max_tpot_s=args.max_tpot_ms / 1e3 if args.max_tpot_ms else None,
            max_ttft_s=args.max_ttft_ms / 1e3 if args.max_ttft_ms else None), pricing=_pricing(args, inst))
        _emit(args.json, est.to_dict(), "\n".join(text.serving(est)))
        return 0 if est.fits else 1
    layout = resolve_layout(inst, args.nodes, tp=args.tp or 1, fsdp=args.fsdp, pp=args.pp, dp=args.dp)
    est = training.estimate(shape, inst, layout, training.TrainingRun(
        nodes=args.nodes, micro_batch=args.batch or 1, seq_len=args.seq_len, global_batch=args.global_batch,
        dtype=dtype, tokens=args.tokens), pricing=_pricing(args, inst))
    note = ("memory here is the cost model's estimate (fused attention, sequence parallel); without "
            "--global-batch, `neuronkit plan` measures this layout with PyTorch's parallel APIs")
    _emit(args.json, est.to_dict(), "\n".join(text.training(est) + [f"note: {note}"]))
    return 0 if est.fits else 1


def _pricing(args: argparse.Namespace, inst):
    from neuronkit.cost.pricing import Pricing

    return Pricing.of(inst, args.price.replace("-", "_"), args.usd_per_hour)


def _emit(json_out: str | None, data: object, text: str) -> None:
    if json_out == "-":
        print(json.dumps(data, indent=2))
        return
    print(text)
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(data, fh, indent=2)
        print(f"\nplan JSON written to {json_out}")
