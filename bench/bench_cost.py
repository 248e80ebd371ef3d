"""The cost model against AWS's published numbers: every training and serving row of the Neuron SDK docs'
performance CSVs the model expresses (neuronkit/data/aws_published_rows.toml), predicted vs published.

    python bench/bench_cost.py          # the validation table (bench/results/cost.json, then make_results.py)
    python bench/bench_cost.py --fit    # refit the constants and bands into neuronkit/data/cost_model.toml
    python bench/bench_cost.py --cli    # `neuronkit plan` with the cost options on 8B and 70B configs, timed
    python bench/bench_cost.py --ttft-bound  # the narrowest TTFT band any refit of the model's form could give

`--fit` sets the four physical constants from the fitting rows (the Llama-3.1-8B pre-training row; the
Llama-3-8B serving rows at 4096 in / 4096 out, batch 1 and batch 8) and the bands from every other row:
each band is the ± within which 9 in 10 of the rows held to it fall. The table lists every row: `fit`,
`held` (inside its band), `MISS` (outside its band: the model's own account of the figure is the reason
column) or `outside` (not held to the band, with the reason). Arithmetic only: no model runs, a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Run

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MODEL_TOML = "neuronkit/data/cost_model.toml"
ROOT = Path(__file__).resolve().parent.parent
METRIC = {"sequences_per_s": "sequences/s", "output_tokens_per_s": "output tokens/s", "tpot_ms": "TPOT ms",
          "ttft_ms": "TTFT ms"}


def write_constants(path: str) -> None:
    """Fit the constants, measure the bands on the other rows, and write them as the frozen data file."""
    from neuronkit.cost import validation

    retrieved = validation.published()["retrieved"]
    fitted = validation.fit(retrieved)
    found = validation.checks(fitted)
    band = validation.bands(found)
    held = [c for c in found if not c.fit and not c.outside]
    rows = "\n".join(f'    "{where}",' for where in fitted.fitted_on)
    text = f'''# The cost model's fitted physical constants and the bands its estimates carry (neuronkit.cost).
# Written by `python bench/bench_cost.py --fit` on {time.strftime("%Y-%m-%d")}; a test holds this file to what
# the published rows give (neuronkit/data/aws_published_rows.toml, retrieved {retrieved}).

retrieved = "{retrieved}"

[fitted]
# compute_fraction: of the dtype's dense peak FLOP/s, from the training row (a compute-bound step).
# hbm_fraction: of HBM bandwidth, from the batch-8 minus batch-1 serving rows' time per output token.
# collective_latency_s: the fixed cost of one collective, from the batch-1 serving row's time per token.
# prefill_compute_fraction: of the dtype's dense peak FLOP/s in a prefill, from the batch-1 row's time to first token.
compute_fraction = {fitted.compute_fraction}
hbm_fraction = {fitted.hbm_fraction}
collective_latency_s = {fitted.collective_latency_s}
prefill_compute_fraction = {fitted.prefill_compute_fraction}
rows = [
{rows}
]

[band]
# ± fraction within which 9 in 10 of the rows held to it fall (predicted / published); fitting rows and rows
# marked outside are not held. `serving` covers output tokens/s and time per output token; `ttft` time to
# first token, stated apart: the published rows disagree among themselves more than any constants of the
# model's form can follow (`python bench/bench_cost.py --ttft-bound`).
training = {band["training"]}
serving = {band["serving"]}
ttft = {band["ttft"]}
training_rows = {sum(1 for c in held if c.kind == "training")}
serving_rows = {len({c.where for c in held if c.kind == "serving"})}
parameters = {list(validation.parameter_range())}  # the smallest and largest model the rows name
'''
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"{path}: {fitted.compute_fraction=}, {fitted.hbm_fraction=}, {fitted.collective_latency_s=}, "
          f"{fitted.prefill_compute_fraction=}, {band=}")


CLI_CASES = {
    "training, one layout": ["--instance", "trn1.32xlarge", "--nodes", "32", "--tp", "32", "--dp", "4", "--pp", "8",
                             "--seq-len", "8192", "--global-batch", "1024"],
    "serving": ["--serve", "--instance", "trn1.32xlarge", "--batch", "4", "--input-len", "2048", "--output-len", "512"],
    "--sweep (training)": ["--sweep", "--seq-len", "8192", "--global-batch", "1024", "--max-days", "60"],
    "--sweep --serve": ["--sweep", "--serve", "--input-len", "1024", "--output-len", "256"],
}


def time_cli() -> None:
    """Each case of `neuronkit plan ... --json -` in a fresh Python on the 8B and 70B configs AWS's rows
    name: wall time, and CPU time (user + system, the child's own: what the command costs on a quiet machine)."""
    from neuronkit.cost import validation

    with Run("cost_cli", "Cost estimates from the command line", "python bench/bench_cost.py --cli") as run, \
            tempfile.TemporaryDirectory() as tmp:
        run.columns(model="config", case="neuronkit plan", wall=("wall time", "{:.1f} s"),
                    cpu=("CPU time", "**{:.1f} s**"), fields="estimate fields")
        run.note = ("`neuronkit plan CONFIG ... --json -` in a fresh Python, the configs of the Llama-3.1 8B and 70B "
                    "rows. CPU time is the command's own (user + system): imports of torch and transformers take "
                    "most of it. Target (issue 37): <= 5 s. Wall time is inflated by the shared machine's load.")
        for name in ("Llama-3.1-8B", "Llama-3.1-70B"):
            config = Path(tmp) / f"{name}.json"
            config.write_text(json.dumps(validation.published()["models"][name]["config"]))
            for case, argv in CLI_CASES.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "neuronkit.cli", "plan", str(config), *argv, "--json", "-"],
                                     capture_output=True, text=True, check=True)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                document = json.loads(out.stdout)
                estimate = (document["candidates"][0] if "candidates" in document else document)["estimate"]
                run.row(model=name, case=case, wall=wall, cpu=after.ru_utime + after.ru_stime - before.ru_utime
                        - before.ru_stime, fields=", ".join(k for k in estimate if k in _REQUIRED))


_REQUIRED = ("sequences_per_s", "tokens_per_s", "output_tokens_per_s", "mfu", "usd_per_hour", "usd_per_million_tokens",
             "band", "price_source")


def ttft_bound() -> None:
    """How narrow a time-to-first-token band any constants of the model's form could give: every prefill
    constant set free (compute and HBM fractions, collective latency) and a fixed per-request overhead the
    model does not have, searched on a grid; the narrowest 9-in-10 band over the held rows is printed. A
    band above the issue's ±50 % here means no refit of this model reaches it on AWS's published rows."""
    import itertools

    from neuronkit.cost import serving, validation
    from neuronkit.cost.constants import frozen
    from neuronkit.planner.instances import instance

    c = frozen()
    rows = [r for r in validation.published()["serving"] if not r["fit"] and not r.get("outside")]
    parts = []  # each row's prefill parts at the frozen constants, rescaled below (each part is linear in its own)
    for r in rows:
        est = serving.estimate(validation._shape(r["model"]), instance(r["instance"]), validation._serving_run(r),
                               constants=c)
        parts.append((est.prefill, r["published_ttft_ms"] / 1e3))
    best: tuple[float, tuple[float, ...]] = (float("inf"), ())
    grid = itertools.product([x / 100 for x in range(4, 41, 2)], [x / 20 for x in range(2, 21)],
                             [x * 2.5e-5 for x in range(0, 17)], [x * 2.5e-3 for x in range(0, 17)])
    for compute, hbm, latency, overhead in grid:
        ratios = [(max(p["compute"] * c.prefill_compute_fraction / compute, p["hbm"] * c.hbm_fraction / hbm,
                       p["traffic"]) + p["latency"] * latency / c.collective_latency_s + overhead) / published
                  for p, published in parts]
        band = validation.spread(ratios)
        if band < best[0]:
            best = (band, (compute, hbm, latency, overhead))
    compute, hbm, latency, overhead = best[1]
    with Run("cost_ttft_bound", "How narrow a TTFT band the model's form allows",
             "python bench/bench_cost.py --ttft-bound") as run:
        run.columns(constants="constants", band=("TTFT band (9 in 10)", "**±{:.0%}**"), values="values")
        run.note = (f"The {len(rows)} held time-to-first-token rows (neuronkit/data/aws_published_rows.toml). "
                    "Searched on a grid: prefill compute fraction 0.04-0.40, HBM fraction 0.10-1.00, collective "
                    "latency 0-400 µs, a per-request overhead 0-40 ms the model does not have. The pairs behind "
                    "it: Mistral-7B-Instruct-v0.2 and Llama-3-8B share every layer shape (32 layers, hidden 4096, "
                    "32/8 heads, MLP 14336; Mistral's vocabulary is the smaller), yet on inf2.48xlarge, tp=24, "
                    "batch 1, 4096 in, AWS publishes 558 ms and 209 ms: no model in which Mistral's prefill takes "
                    "no longer than Llama-3-8B's holds both within ±50 % (Mistral needs >= 372 ms, Llama-3-8B <= "
                    "314 ms). On trn1.32xlarge, tp=32, Llama-2-13B's 4096-token prefill is published at 5.6 x "
                    "Llama-3-8B's for 1.6 x the parameters.")
        run.row(constants="frozen (neuronkit/data/cost_model.toml)", band=c.band_ttft,
                values=f"prefill compute fraction {c.prefill_compute_fraction}, HBM fraction {c.hbm_fraction}, "
                       f"collective latency {c.collective_latency_s * 1e6:.1f} µs")
        run.row(constants="every prefill constant free, plus a per-request overhead", band=best[0],
                values=f"prefill compute fraction {compute}, HBM fraction {hbm}, collective latency "
                       f"{latency * 1e6:.0f} µs, overhead {overhead * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help=f"refit the constants and bands into {MODEL_TOML}")
    parser.add_argument("--cli", action="store_true", help="time `neuronkit plan` with the cost options")
    parser.add_argument("--ttft-bound", action="store_true",
                        help="the narrowest TTFT band any prefill constants (and a per-request overhead) could give")
    args = parser.parse_args()
    if args.ttft_bound:
        ttft_bound()
        return
    if args.fit:
        write_constants(str(ROOT / MODEL_TOML))
        return
    if args.cli:
        time_cli()
        return
    from neuronkit.cost import validation
    from neuronkit.cost.constants import frozen

    constants = frozen()
    found = validation.checks(constants)
    band = {"training": constants.band_training, "serving": constants.band_serving, "ttft": constants.band_ttft}
    missed = {id(c) for c in validation.misses(found, band)}
    with Run("cost", "Cost model against AWS's published rows", "python bench/bench_cost.py") as run:
        run.columns(status="", kind="kind", row="published row", metric="metric",
                    published=("published", "{:,.2f}"), predicted=("predicted", "{:,.2f}"),
                    ratio=("ratio", "**{:.2f}**"), why="reason (MISS: the model's account; outside: why not held)",
                    where="file:line (aws-neuron/aws-neuron-sdk@81ce03ae)")
        held = [c for c in found if not c.fit and not c.outside]
        run.note = (f"Fitted on {len(constants.fitted_on)} rows, frozen in {MODEL_TOML}: compute fraction "
                    f"{constants.compute_fraction}, HBM fraction {constants.hbm_fraction}, collective latency "
                    f"{constants.collective_latency_s * 1e6:.1f} µs, prefill compute fraction "
                    f"{constants.prefill_compute_fraction}. Bands (± within which 9 in 10 held rows "
                    f"fall): training ±{constants.band_training:.0%} on "
                    f"{sum(1 for c in held if c.kind == 'training')} rows, serving (output tokens/s and TPOT) "
                    f"±{constants.band_serving:.0%} on {len({c.where for c in held if c.kind == 'serving'})} rows, "
                    f"TTFT ±{constants.band_ttft:.0%} (stated apart). {len(missed)} held figures fall outside their "
                    f"band (MISS); ratio = predicted / published.")
        for c in sorted(found, key=lambda c: (not c.fit, c.kind != "training", id(c) not in missed, c.metric)):
            status = "fit" if c.fit else "outside" if c.outside else "MISS" if id(c) in missed else "held"
            run.row(status=status, kind=c.kind, row=c.row, metric=METRIC[c.metric], published=c.published,
                    predicted=c.predicted, ratio=c.ratio, why=c.outside or (c.detail if status == "MISS" else ""),
                    where=c.where)
    print(f"\nbands: training ±{constants.band_training:.0%}, serving ±{constants.band_serving:.0%}, "
          f"TTFT ±{constants.band_ttft:.0%}; {len(missed)} misses", file=sys.stderr)


if __name__ == "__main__":
    main()
