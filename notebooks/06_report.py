# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python (neuronkit)
#     language: python
#     name: neuronkit
# ---

# %% [markdown]
# # 06 · Report: the migration verdict, from the run's records
#
# Every stage left one record in `run_dir/stages/`. This notebook renders them into the migration
# report, one self-contained `report.html` (open it in any browser, attach it to a ticket) and its
# machine-readable twin `report.json`, and shows the verdict here. The report reads only those records:
# it never re-runs a model, and it never claims more than the records hold.

# %% tags=["parameters"]
# Parameters. `neuronkit run` (papermill) injects its values in a cell right after this one;
# keep them literal: the next cell validates them and derives everything else.
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load models from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars in executed notebooks

model: str = "tiny-qwen3"  # the model notebooks 00-05 ran
run_dir: str = ""          # the run directory they wrote ("": runs/<model name> at the repository root)

# %%
from neuronkit import report
from neuronkit.workbook import display, lesson, report_dir

paths = report(report_dir(model, run_dir))  # the records the run has (none yet: it stops here); the rest, missing
run_dir = str(paths.json.parent)  # the run directory ("" made the model's own)
verdict = paths.model  # what report.html and report.json say: verdict, reasons, next steps, stage cards

# %% [markdown]
# ## The verdict
#
# - **Ready**: every stage passed; the model runs on `neuron` with parity against the CPU and every
#   audited op runs natively.
# - **Ready with CPU fallbacks**: it runs with parity, but ops of the model's own forward or training step
#   fall back to the CPU (a host round trip per call), maybe with other findings to plan for.
# - **Ready, with caveats**: the model's forward and training step run natively; findings to plan for
#   remain: recompiles, emulated dtypes, or ops only `generate()`'s decoding loop sends to the CPU (every
#   Hugging Face causal LM's greedy search calls `argmax` and `isin` there).
# - **Blocked**: the audit found first-release blockers, or eager parity failed. The reasons name what must
#   change.
# - **Incomplete**: a stage errored, was skipped or has no record, so the run cannot be judged yet. Fix the
#   first failing stage (its traceback is in the report) and run again.

# %%
statuses = [card.status for card in verdict.stages]
lesson.key_numbers({
    "verdict": verdict.verdict_label,
    "stages passed": f"{statuses.count('pass')} of {len(statuses)}",
    "warnings": statuses.count("warn"),
    "failed, errored or skipped": len(statuses) - statuses.count("pass") - statuses.count("warn"),
})

# %%
print("Reasons:" if verdict.reasons else "No reasons: every stage passed.")
for reason in verdict.reasons:
    print(" -", reason)
print("What to do next:")
for number, step in enumerate(verdict.next_steps, 1):
    print(f" {number}.", step)
display.report_link(paths.html)

# %% [markdown]
# ## `report.json`, read as CI would
#
# `report.json` carries the same verdict, findings and key numbers as the page, with numbers as numbers
# (and their units), so a script can act on them with nothing but `json`. The gate below is the one
# `neuronkit report RUN_DIR --fail-on cpu_fallback` applies: fail on a CPU fallback in the model's own
# forward or training step, not on one only `generate()`'s decoding loop makes.

# %% tags=["copy"]
import json
from pathlib import Path

summary = json.loads((Path(run_dir) / "report.json").read_text(encoding="utf-8"))
print(f"{summary['model']}: {summary['verdict']} ({summary['verdict_label']})")
for number in summary["key_numbers"]:
    if number["number"] is not None:
        print(f"  {number['label']}: {number['number']:.3g} {number['unit']}")
in_model_path = [f["op"] for f in summary["blockers"] + summary["warnings"]
                 if f["category"] == "cpu_fallback" and f["phases"] != ["generate"]]
print("CPU fallbacks in the model's path:", ", ".join(in_model_path) or "none")
gate = 0 if summary["verdict"].startswith("ready") and not in_model_path else 1
print("exit status for CI:", gate)

# %% [markdown]
# ## Where the run's time went
#
# Each stage's duration as its record states it (host timing; on the simulator, compilation is the
# host's lowering, not neuronx-cc):

# %%
import matplotlib.pyplot as plt

colours = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e", "error": "#cf222e", "skipped": "#6e7781"}
cards = verdict.stages[::-1]
fig, ax = plt.subplots(figsize=(6, 2.8))
ax.barh([card.stage for card in cards], [card.duration_s or 0 for card in cards],
        color=[colours.get(card.status, "#d0d7de") for card in cards])  # grey: a stage not run yet
ax.set_xlabel("seconds (host timing)")
ax.set_title(f"{verdict.verdict_label}: stage durations, coloured by status")
plt.show()

# %% [markdown]
# ## Compare the stages
#
# The numbers the stages share, side by side: step times (CPU forward; eager and compiled forward on the
# device, both measured by notebook 04), the largest parity error against each stage's reference (eager
# against the CPU, compiled against eager) and how many CPU-fallback ops each stage saw.

# %%
display.comparison(run_dir)

# %%
lesson.folded(display.table([{"stage": card.stage, "status": card.status, "summary": card.summary,
                               "duration": "—" if card.duration_s is None else f"{card.duration_s:.1f} s"}
                              for card in verdict.stages]),
              "Every stage's one-line summary")

# %% [markdown]
# In JupyterLab, pick two stages to see their full records side by side:

# %%
lesson.interactive(display.compare_widget(run_dir),
                   "(two stage pickers with the records side by side: run the notebook in JupyterLab)")

# %% [markdown]
# ## Try it
#
# Change the gate above to fail on another category of finding (`summary["warnings"]` lists what this run
# has), or run `neuronkit report RUN_DIR --fail-on cpu_fallback` in a terminal and read its exit status.
#
# ## Recap
#
# - The report reads the stages' records (whatever exist) and never re-runs the model.
# - `report.html` is for people, `report.json` for scripts: the verdict, each finding with the phase it was
#   seen in, the key numbers with units.
# - A CPU fallback only `generate()` makes is not one in the model's path.
#
# ## Next
#
# Share `report.html`. To repeat the run (on Trainium, or after changing the model), use the command in
# the report's *Reproduce* section. For a run whose notebooks were executed by `neuronkit run`, the
# executed notebooks with their outputs are in `artifacts/notebooks/`. Scaling past one core is notebook
# 07's subject; writing your own kernel for a hot op, notebook 08's.

# %% jupyter={"source_hidden": true} tags=["nbval-check-output", "remove-cell"]
# CI's nbval check (hidden, shows nothing here): the verdict and each stage's status
checked_lines = [f"verdict: {verdict.verdict_label}", *(f"{card.stage}: {card.status}" for card in verdict.stages)]
display.checked("\n".join(checked_lines))
