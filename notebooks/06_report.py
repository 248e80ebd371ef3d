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

run_dir: str = "../runs/tiny-qwen3"  # the run directory notebooks 00-05 wrote

# %%
import json

from neuronkit import report
from neuronkit.workbook import display

paths = report(run_dir)
verdict = json.loads(paths.json.read_text())

# %% [markdown]
# ## The verdict
#
# - **Ready**: every stage passed; the model runs on `neuron` with parity against the CPU and every
#   audited op runs natively.
# - **Ready with CPU fallbacks**: it runs with parity, with caveats to plan for: ops that fall back to the
#   CPU, recompiles, emulated dtypes.
# - **Blocked**: the audit found first-release blockers, or eager parity failed. The reasons name what must
#   change.
# - **Incomplete**: a stage errored, was skipped or has no record, so the run cannot be judged yet. Fix the
#   first failing stage (its traceback is in the report) and run again.

# %%
print("verdict:", verdict["verdict_label"])
for reason in verdict["reasons"]:
    print(" -", reason)
display.report_link(paths.html)

# %% [markdown]
# ## Compare the stages
#
# One row per stage: its status, its one-sentence summary and how long it took. The second table lines
# up the numbers the stages share so you can see where time and accuracy go as the model moves from CPU
# to eager to compiled: step times (CPU forward; eager and compiled forward on the device, both measured
# by notebook 04), the largest parity error against each stage's reference (eager against the CPU,
# compiled against eager) and how many CPU-fallback ops each stage saw. In JupyterLab, the widget shows
# two stages' full evidence side by side.

# %%
display.table([{"stage": stage, **card} for stage, card in verdict["stages"].items()],
              ["stage", "status", "summary", "duration_s"])

# %%
display.comparison(run_dir)

# %%
display.compare_widget(run_dir)

# %% [markdown]
# ## Next
#
# Share `report.html`. To repeat the run (on Trainium, or after changing the model), use the command in
# the report's *Reproduce* section. For a run whose notebooks were executed by `neuronkit run`, the
# executed notebooks with their outputs are in `artifacts/notebooks/`.
#
# The last cell prints the verdict and each stage's status, which CI checks with nbval.

# %%
# NBVAL_CHECK_OUTPUT
print("verdict:", verdict["verdict_label"])
for stage, card in verdict["stages"].items():
    print(f"{stage}: {card['status']}")
