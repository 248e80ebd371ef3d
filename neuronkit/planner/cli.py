"""`neuronkit plan MODEL`: will this parallel layout fit each NeuronCore, and what will it send?

Exit status: 0 the layout fits (or `--sweep` found layouts that fit), 1 it does not (or none fit),
2 bad input (one-line error).
"""

from __future__ import annotations

import argparse
import json


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help="checkpoint directory, config.json, or bundled model (weights are never read)")
    parser.add_argument("--instance", default="trn2.48xlarge", help="instance type (default trn2.48xlarge)")
    parser.add_argument("--nodes", type=int, default=1, metavar="K", help="instances (default 1)")
    parser.add_argument("--tp", type=int, default=1, metavar="T", help="tensor-parallel degree (default 1)")
    parser.add_argument("--fsdp", type=int, default=None, metavar="F",
                        help="FSDP2 sharding degree (default: the cores left after tp, pp and dp)")
    parser.add_argument("--pp", type=int, default=1, metavar="P", help="pipeline stages (default 1)")
    parser.add_argument("--dp", type=int, default=1, metavar="D", help="data-parallel replicas (default 1)")
    parser.add_argument("--batch", type=int, default=1, metavar="B", help="micro-batch per rank (default 1)")
    parser.add_argument("--seq-len", type=int, default=2048, metavar="S", help="tokens per sequence (default 2048)")
    parser.add_argument("--microbatches", type=int, default=None, metavar="M",
                        help="micro-batches per step (default: pp)")
    parser.add_argument("--dtype", default="bfloat16", help="parameter dtype (default bfloat16)")
    parser.add_argument("--sweep", action="store_true",
                        help="propose the layouts that fit on the fewest instances instead of checking one")
    parser.add_argument("--json", metavar="OUT", help="write the plan(s) as JSON to OUT ('-' for stdout)")


def run(args: argparse.Namespace) -> int:
    from neuronkit.planner.plan import plan, sweep  # after argument parsing: loads transformers

    if args.sweep:
        plans = sweep(args.model, instance=args.instance, dtype=args.dtype, micro_batch=args.batch,
                      seq_len=args.seq_len)
        text = "\n".join(p.verdict() + f"; est. communication {p.comm_seconds * 1e3:.0f} ms/step" for p in plans)
        _emit(args.json, [p.to_dict() for p in plans],
              text or f"no layout fits on up to 16 × {args.instance} at this batch and sequence length")
        return 0 if plans else 1
    result = plan(args.model, tp=args.tp, fsdp=args.fsdp, pp=args.pp, dp=args.dp, instance=args.instance,
                  nodes=args.nodes, dtype=args.dtype, micro_batch=args.batch, seq_len=args.seq_len,
                  microbatches=args.microbatches)
    _emit(args.json, result.to_dict(), result.table())
    return 0 if result.fits else 1


def _emit(json_out: str | None, data: object, text: str) -> None:
    if json_out == "-":
        print(json.dumps(data, indent=2))
        return
    print(text)
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(data, fh, indent=2)
        print(f"\nplan JSON written to {json_out}")
