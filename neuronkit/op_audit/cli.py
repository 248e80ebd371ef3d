"""`neuronkit audit MODEL`: print what a model will do on Trainium; exit 1 on findings you refuse. `--compat`
adds the model's public PyTorch calls in AWS's compatibility-table vocabulary.

Exit status: 0 ready (findings to plan for allowed), 1 blocker findings or findings of a `--fail-on`
category exist, 2 bad input (one-line error).
"""

from __future__ import annotations

import argparse
import sys

from neuronkit.errors import DTYPES
from neuronkit.pipeline.config import DEFAULTS
from neuronkit.policy import fail_on_categories


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help="checkpoint directory, config.json, or bundled model (tiny-qwen3, tiny-bert, qwen3-100m)")
    parser.add_argument("--json", metavar="OUT", help="write the audit JSON document to OUT ('-' for stdout)")
    parser.add_argument("--backward", action="store_true", help="also audit the backward pass")
    parser.add_argument("--optimizer-step", action="store_true", help="also audit one AdamW step (implies --backward)")
    parser.add_argument("--generate", action="store_true",
                        help="also audit generate() (runs on random weights, which must fit in memory)")
    parser.add_argument("--random-weights", action="store_true",
                        help="run the model on random weights instead of weightless (they must fit in memory; a "
                             "model whose code reads tensor values, e.g. transformers' eager MoE experts, is traced "
                             "on them anyway)")
    parser.add_argument("--compat", action="store_true",
                        help="list the public PyTorch APIs the model calls as AWS's compatibility table classifies "
                             "them (Y Native/Host-only/Needs a process group, CPU_FALLBACK, N), after the summary")
    parser.add_argument("--fail-on", metavar="CATEGORY[,...]", default="",
                        help="exit 1 when findings of these categories exist (e.g. mha_mask,cpu_fallback)")
    parser.add_argument("--seq-len", type=int, default=DEFAULTS.seq_len, metavar="N",
                        help=f"tokens per example input (default {DEFAULTS.seq_len})")
    parser.add_argument("--dtype", default=DEFAULTS.dtype, choices=DTYPES,
                        help=f"parameter dtype (default {DEFAULTS.dtype})")


def run(args: argparse.Namespace) -> int:
    fail_on = fail_on_categories(args.fail_on)
    from neuronkit.op_audit import audit  # after validating arguments: loads transformers

    report = audit(args.model, backward=args.backward, optimizer_step=args.optimizer_step, generate=args.generate,
                   dtype=args.dtype, seq_len=args.seq_len, weightless=False if args.random_weights else None)
    if args.json == "-":
        print(report.to_json())
    else:
        print(report.table())
        if args.compat:
            print("\n" + report.compat_table())
        if args.json:
            report.to_json(args.json)
            print(f"\naudit JSON written to {args.json}")
    failing = sorted({f.category for f in report.findings_in(*fail_on)}) if fail_on else []
    if failing:
        print(f"neuronkit audit: findings in --fail-on categories: {', '.join(failing)}", file=sys.stderr)
        return 1
    blockers = sorted({b.category for b in report.summary.blockers})
    if blockers:
        print(f"neuronkit audit: blocked: blocker findings in {', '.join(blockers)}", file=sys.stderr)
        return 1
    return 0
