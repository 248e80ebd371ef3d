"""Write the workbook notebooks 00..06 from the cell texts below, clean: no outputs, no execution counts.

The .ipynb files are the product; this script keeps their shared parts identical (the `parameters` cell,
the validation cell, the checked summary cell) and their cell ids stable, so diffs stay readable.

    python notebooks/build_notebooks.py           # rewrite the notebooks
    python notebooks/build_notebooks.py --check   # exit 1 when a notebook differs from what this writes
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
KERNELSPEC = {"name": "neuronkit", "display_name": "Python (neuronkit)", "language": "python"}

ENVIRONMENT = """\
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # load models from local files only, never from the Hub
os.environ.setdefault("TQDM_DISABLE", "1")    # no progress bars in executed notebooks
"""
RUN_PARAMETERS = """\
model: str = "tiny-qwen3"            # a bundled model (tiny-qwen3, tiny-bert) or your checkpoint directory
run_dir: str = "../runs/tiny-qwen3"  # this run's directory: every notebook of one run uses the same one
dtype: str = "float32"               # float32, bfloat16 or float16
seq_len: int = 16                    # tokens per example input
batch_size: int = 1                  # example inputs per batch
"""
REPORT_PARAMETERS = """\
run_dir: str = "../runs/tiny-qwen3"  # the run directory notebooks 00-05 wrote
"""
CHECKED_SUMMARY = """\
# NBVAL_CHECK_OUTPUT
print(display.summary(result))
"""
NEXT_FOOTER = """

The last cell prints the facts CI checks with nbval (`# NBVAL_CHECK_OUTPUT`): the stage's status and the
evidence that depends only on the model and the parameters, never on timings or paths.
"""


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip())


def next_steps(text: str) -> nbformat.NotebookNode:
    """The closing markdown cell: where to go next, and what the checked summary cell below it is."""
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip() + NEXT_FOOTER.rstrip())


def code(text: str, *tags: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(textwrap.dedent(text).strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def parameters_cell(stage_parameters: str = "", run_parameters: str = RUN_PARAMETERS) -> nbformat.NotebookNode:
    """The first code cell: environment defaults, then literal parameters papermill can override."""
    header = ("# Parameters. `neuronkit run` (papermill) injects its values in a cell right after this one;\n"
              "# keep them literal: the next cell validates them and derives everything else.\n")
    body = ENVIRONMENT + "\n" + run_parameters + ("\n" + textwrap.dedent(stage_parameters) if stage_parameters else "")
    return code(header + body, "parameters")


def setup_cell(stage: str) -> nbformat.NotebookNode:
    return code(f"""\
        from neuronkit.workbook import display, parameters, {stage}

        params = parameters(model=model, run_dir=run_dir, dtype=dtype, seq_len=seq_len, batch_size=batch_size)
        params
        """)


def environment() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 00 · Environment: which `neuron` device, which model

        This workbook moves a PyTorch / Hugging Face model to AWS Trainium with **TorchNeuron**, the native
        PyTorch backend, one notebook per step of the migration order: CPU baseline → eager on `neuron` → op
        audit → `torch.compile` → profiling → report.

        This first notebook teaches where the `neuron` device comes from, and starts a run: it checks which
        device this Python process has, describes the model you are migrating, and records both in the run
        directory that every later notebook writes to.

        **You set** the parameters in the next cell. `model` is a bundled model (`tiny-qwen3`, a causal LM;
        `tiny-bert`, an encoder) or the path of your own Hugging Face checkpoint directory (`config.json`,
        `*.safetensors`, tokenizer files). Run the notebooks in order with the same parameters, or all of them
        at once with `neuronkit run MODEL --out DIR`.
        """),
        parameters_cell(),
        md("""\
        The cell below validates the parameters before anything is loaded: a missing checkpoint, a value of
        the wrong type or an unknown dtype stops here, with one message listing every problem.
        """),
        setup_cell("environment"),
        md("""\
        ## How TorchNeuron becomes a PyTorch device

        TorchNeuron registers Trainium through PyTorch's **PrivateUse1** extension point, the slot PyTorch
        reserves for out-of-tree hardware, under the name `neuron`, and PyTorch **autoloads** it during
        `import torch` (a `torch.backends` entry point; `TORCH_DEVICE_BACKEND_AUTOLOAD=0` switches autoloading
        off). There is no `import torch_neuronx` to write: `torch.device("neuron")`, `tensor.to("neuron")`,
        `torch.neuron.*` and `torch.accelerator` just work, and Transformers, accelerate or TorchTitan need no
        Neuron-specific branch.

        On a machine without Trainium, neuronkit **simulates** the device on the CPU with the same
        registration, the same op-support policy (native, CPU fallback, unsupported) and the same NEFF cache,
        so every step of the workbook can be rehearsed before you rent a trn2 instance.
        """),
        code("""\
        import torch

        x = torch.ones(2, 2, device="neuron")  # an ordinary tensor on the PrivateUse1 device
        print("tensor device:    ", x.device)
        print("torch.accelerator:", torch.accelerator.current_accelerator())
        print("neuron devices:   ", torch.neuron.device_count(), "logical NeuronCores")
        """),
        md("""\
        ## Record the environment

        `environment.run` starts the run: it writes `params.json` into `run_dir`, removes stage records an
        earlier run left there, and records in `stages/00_environment.json` the device report
        (`neuronkit.detect()`), the model's architecture and size read from its `config.json` (no weights are
        loaded yet) and the parameters.
        """),
        code("""\
        result = environment.run(params)
        display.show(result)
        """),
        md("""\
        ## How to read it

        - **kind**: `real` (torch-neuronx and a Neuron device node), `simulated` (neuronkit on the CPU) or
          `none`, with the *reason*. With `none` the stage fails and the later stages are skipped; on a
          Trn2/Trn3 instance check `pip show torch-neuronx` and `neuron-ls`.
        - **device count, instance family, HBM per core**: PyTorch sees *logical* NeuronCores. On trn2 the
          default LNC=2 pairs two physical cores, so a trn2.48xlarge shows 64 devices of 24 GiB. Limit them with
          `NEURON_RT_VISIBLE_CORES` or `NEURON_RT_NUM_CORES`, set before Python starts.
        - **estimated bytes**: the weights alone in `dtype`. When they exceed one core's HBM the stage warns:
          the model needs tensor parallelism across cores, or a smaller dtype (`bfloat16` halves it).
          Activations, gradients and optimizer state come on top.
        - **versions**: keep them with your results; the report repeats them.
        """),
        md("""\
        ## Another model or dtype

        To migrate your own checkpoint, set `model` (and `run_dir`) in the parameters cell and run the
        notebooks again, or run the whole workbook from a terminal. The cell prints the command for the
        current parameters; in JupyterLab, its widgets rebuild the command for another model or dtype.
        """),
        code("display.command_picker(params)"),
        next_steps("""\
        ## Next

        Open **01_cpu_baseline** with the same parameters: it records what the model does on the CPU, the
        reference every later step is held to.
        """),
        code(CHECKED_SUMMARY),
    ]


def cpu_baseline() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 01 · CPU baseline: the reference every later step is held to

        Before anything moves to Trainium, record what the model does where it already works. This notebook
        loads the model on the CPU in `dtype`, times its forward pass, records its loss on deterministic example
        inputs and samples it: a greedy continuation of `prompt` for a causal LM, the top guesses for a
        `[MASK]` for an encoder. Notebook 02 runs the same inputs on `neuron` and compares against these.
        """),
        parameters_cell("""\
        prompt: str = "A migration starts with"  # causal LM: text to continue; encoder: text with a [MASK]
        max_new_tokens: int = 16                 # tokens of greedy generation
        timing_steps: int = 5                    # timed forward passes (after one warm-up)
        """),
        setup_cell("cpu_baseline"),
        md("""\
        ## What the stage does

        `cpu_baseline.run` loads the checkpoint with `from_pretrained` (local files, safetensors only), builds
        `batch_size × seq_len` token ids with the model's tokenizer (the same ids in every notebook), runs one
        warm-up forward pass, then times `timing_steps` more and keeps the median. Greedy decoding has no
        randomness, so a correct device reproduces it token for token.
        """),
        code("""\
        result = cpu_baseline.run(params, prompt=prompt, max_new_tokens=max_new_tokens, timing_steps=timing_steps)
        display.show(result)
        """),
        md("""\
        ## How to read it

        - **Forward time** is this CPU's speed with the thread count shown: a sanity number, not a Trainium
          prediction. Notebook 04 compares eager and compiled step times on the device.
        - **Loss** should be plausible for the model (a trained causal LM: a few nats). NaN or infinity fails
          the stage: fix the model on the CPU first, since nothing can be judged against a broken reference.
        - **Generation / fill-mask** is the behaviour you expect to keep. Read it now; notebook 02 checks that
          `neuron` produces the same tokens.
        """),
        next_steps("""\
        ## Next

        Open **02_eager_on_neuron**: the one-line change, `model.to("neuron")`, and a parity check against
        this baseline.
        """),
        code(CHECKED_SUMMARY),
    ]


def eager_on_neuron() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 02 · Eager on `neuron`: the one-line change, and are the answers still right?

        The PyTorch blog's migration is a single line, `model.to("neuron")`. In **eager mode** every ATen op is
        dispatched to the neuron backend as Python reaches it: lowered to StableHLO, compiled by neuronx-cc into
        a NEFF, and run. Each distinct op signature (op, shapes, dtypes, static arguments) compiles once and is
        then served from the **NEFF cache**, in memory and on disk (`TORCH_NEURONX_NEFF_CACHE_DIR`), so a second
        run starts warm. An op without a Neuron lowering **falls back to the CPU** silently: its tensors go to
        the host and back, and only `torch_neuronx.get_fallback_ops()` tells you. Eager mode runs op by op with
        every value inspectable: it is the debugging mode, and the first thing to get right.

        This notebook moves the model, runs the CPU baseline's inputs, and holds the device to the CPU: outputs
        within tolerance, the same top-1 tokens, the same greedy generation, and a few training steps with the
        same losses and gradient norms.
        """),
        parameters_cell("""\
        device: str = "neuron"    # the NeuronCore to run on, e.g. "neuron:0"
        train_steps: int = 2      # SGD steps compared between CPU and neuron
        generate_tokens: int = 8  # greedy tokens compared (causal LMs)
        """),
        setup_cell("eager"),
        md("""\
        ## The one-line change

        The seed article's training loop; only the first line is new:

        ```python
        model = MyModel().to("neuron")   # the only change
        optimizer = torch.optim.AdamW(model.parameters())
        for batch in dataloader:
            optimizer.zero_grad()
            loss = criterion(model(batch), targets)
            loss.backward()
            optimizer.step()
        ```

        Hugging Face models can also load straight onto the device with `from_pretrained(path,
        device_map="neuron")`. On a toy layer, with the op tracking the backend keeps:
        """),
        code("""\
        import torch
        import torch_neuronx  # on the simulator: neuronkit's stand-in with the same tracking API

        torch_neuronx.clear_op_tracking()
        layer = torch.nn.Linear(4, 2).to("neuron")
        y = layer(torch.randn(3, 4, device="neuron"))
        print("output on:         ", y.device)
        print("ran on the device: ", sorted(torch_neuronx.get_executed_ops()))
        print("fell back to CPU:  ", sorted(torch_neuronx.get_fallback_ops()))
        """),
        md("""\
        The layer's matmul ran on the device. Random-number ops (`torch.randn` lowers to `aten::normal_`) draw
        their numbers on the host in the pre-release backend, so expect them among the fallbacks: harmless
        here, worth knowing inside a training step.
        """),
        md("""\
        ## The parity check

        `eager.run` calls `neuronkit.compile.check` with its eager, generate and train stages: it copies the
        model to the device, runs the same inputs as notebook 01 and compares every output with the CPU's.
        Tolerances follow `dtype`: float32 must match within 1e-4; bfloat16 and float16 run under
        `torch.autocast("neuron")` against the float32 CPU reference, with looser bounds. Training uses SGD
        rather than Adam, which would turn rounding-level gradient differences into full-size updates.
        """),
        code("""\
        result = eager.run(params, device=device, train_steps=train_steps, generate_tokens=generate_tokens)
        display.show(result)
        """),
        md("""\
        ## How to read it

        - **Parity**: per output, the largest absolute error and the error relative to the output's largest
          magnitude, against `atol`/`rtol`; **top-1 agreement** is the share of positions whose most likely
          token is the same; **generate identical** says whether greedy decoding produced the same tokens.
        - **Training**: CPU and neuron losses and gradient norms step by step; `ok` when they agree within the
          dtype's tolerance.
        - **CPU fallback ops** ran on the host. Each is a round trip per call: fine for a rare op, costly inside
          every layer. Notebook 03 says where each one comes from.
        - **NEFF cache**: `misses` are compilations, `hits` reuse; `disk_hits` come from an earlier process. On
          Trainium the misses are the slow part of a first run.
        - **Memory**: bytes allocated on the device against one core's HBM.
        - **Untied parameters**: moving a module with `.to()` gives each tied weight its own copy; the check
          re-ties them. In your code call `model.tie_weights()` after moving, or load with `device_map`.

        A `fail` here marks the model *blocked* in the report, and notebooks 04 and 05 are skipped: start from
        the output with the largest error. `NEURONKIT_STRICT=1` in the environment (before Python starts) makes
        every CPU fallback raise where it happens.
        """),
        code("""\
        display.table(result.evidence.get("parity", {}).get("outputs", []),
                      ["name", "shape", "max_abs_err", "max_rel_err", "atol", "rtol", "ok"])
        """),
        next_steps("""\
        ## Next

        Open **03_op_audit**: every op the model runs, classified, with the module that issued it.
        """),
        code(CHECKED_SUMMARY),
    ]


def compile_notebook() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 04 · `torch.compile`: graphs instead of ops, and the shapes that recompile them

        Eager mode compiles and launches one NEFF per op. `torch.compile` with the `neuron` backend captures
        whole graphs: TorchDynamo traces the Python, AOTAutograd builds the forward and backward graphs ahead of
        time, the backend lowers each graph to StableHLO and neuronx-cc compiles one NEFF per graph (there is no
        Inductor). The documented rules that shape a migration:

        - `fullgraph=True` is recommended. A **graph break** splits the model into several graphs, each
          compiled on its own, with Python running in between.
        - Shapes are static: `dynamic=True` is **rejected**, and every new input shape **recompiles**. Real
          inputs of many lengths need padding into a few **buckets**.
        - `mode` accepts only `"default"`; other modes warn and fall back to it.
        - The first call pays the compilation; the NEFF cache makes later runs cheap.
        """),
        parameters_cell("""\
        device: str = "neuron"  # the NeuronCore to compile for, e.g. "neuron:0"
        timing_runs: int = 5    # interleaved eager/compiled timings (medians)
        prompts_file = None     # your prompts, one per line, for bucket advice (None: data/sample_prompts.txt)
        max_buckets: int = 4    # at most this many bucket lengths, i.e. compilations
        """),
        setup_cell("compile"),
        md("""\
        ## Compiling for Trainium

        From the seed article: set the default backend once, before the first compilation, or name it in each
        call.

        ```python
        torch.compiler.set_default_backend("neuron")  # call once, before any compile
        model = MyModel().to("neuron")
        model.compile()  # no backend argument
        ```

        `compile.run` runs `neuronkit.compile.check`'s compile and timing stages: it compiles the model on the
        device, runs a forward and backward pass against eager, feeds a shorter input to count recompiles, and
        times eager against compiled. It then measures the token lengths of `prompts_file` and asks
        `suggest_buckets` how to bound the compilations they would cause.
        """),
        code("""\
        result = compile.run(params, device=device, timing_runs=timing_runs, prompts_file=prompts_file,
                             max_buckets=max_buckets)
        display.show(result)
        """),
        md("""\
        ## How to read it

        - **Graphs and graph breaks**: one graph is the goal. Each break has a reason and the source line that
          caused it; an op the first release does not support (say, fused attention with an arbitrary mask)
          breaks the graph there and runs eagerly.
        - **Recompiles**: the graphs a second, shorter input compiled. Each one is a full compilation on
          Trainium.
        - **Compile time, eager and compiled step times, speed-up**: on the simulator the times are the host's;
          read the ratio, and measure on Trainium before you trust an absolute number.
        - **Parity** compares the compiled model with eager on the device, output by output.
        - **Buckets**: how many compilations the prompt lengths cause unbucketed (one per distinct length), the
          recommended bucket lengths, the compilations left and the padding they cost.
        """),
        code("""\
        display.table(result.evidence.get("graph_breaks", []), ["reason", "where"])
        """),
        code("""\
        display.buckets(result.evidence.get("buckets"))
        """),
        next_steps("""\
        ## Next

        Remove graph breaks first: each reason names the op or the Python construct that split the graph, and
        notebook 03's remedies apply to unsupported ops. Then pad real inputs up to the recommended bucket
        lengths, so that serving compiles only that many graphs. Open **05_profiling** to see where the time
        goes, op by op, on the device.
        """),
        code(CHECKED_SUMMARY),
    ]


def op_audit() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 03 · Op audit: the ATen ops your model runs, and what Neuron does with each

        Every PyTorch model ends up as a stream of ATen operators (`aten::mm`, `aten::softmax`, ...).
        TorchNeuron lowers each op to StableHLO and compiles it with neuronx-cc into a NEFF; an op without a
        Neuron lowering **falls back to the CPU** by default (correct, but a host round trip on every call), and
        a few features are **not supported** by the first release at all: sparse tensors, NestedTensor,
        dynamic or symbolic shapes, arbitrary attention masks in fused attention (only none and causal),
        per-channel quantization, forward-mode AD. 64-bit dtypes are computed in 32 bit.

        This notebook lists the ops your model actually issues and classifies each one, so you learn what
        will fall back or block before you are on a rented instance.
        """),
        parameters_cell("""\
        training: bool = True   # also audit backward and one optimizer step (AdamW)
        generate: bool = False  # also audit greedy generate() (causal LMs; runs on random weights, needs the memory)
        """),
        setup_cell("audit"),
        md("""\
        ## How the audit works

        PyTorch's own dispatcher hook, `TorchDispatchMode`, sees every op a model issues without touching the
        model's code. This is the whole idea:

        ```python
        from torch.utils._python_dispatch import TorchDispatchMode

        class OpInventory(TorchDispatchMode):
            def __init__(self):
                self.seen = {}

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.seen[str(func)] = self.seen.get(str(func), 0) + 1
                return func(*args, **(kwargs or {}))
        ```

        `neuronkit.audit` does the same and adds what a migration needs: the module each op came from, the
        dtypes and shapes it saw, and a classification against the Neuron op-support policy that the
        simulated device and the compile backend share. It runs **weightless** (the model is built inside a
        `FakeTensorMode`: shapes and dtypes without storage), so a multi-billion-parameter checkpoint audits in
        seconds; `generate=True` needs real values and uses random weights.
        """),
        code("""\
        result = audit.run(params, training=training, generate=generate)
        display.show(result)
        """),
        md("""\
        ## How to read it

        - **Native support by op and by call**: the share of distinct ops, and of calls, with a Neuron
          lowering. A few fallback ops called once are cheap; a fallback inside every layer is a host round trip
          per layer per step.
        - **Findings** carry a severity. *blocker*: the first release does not support it; change the model
          before migrating (the stage fails). *warn*: runs, at a cost (CPU fallback, recompiles); plan for it
          (the stage warns). *info*: worth knowing, e.g. int64 indices computed in 32 bit.
        - Every finding names the module paths that issued the op and a **remedy**.

        The full op table and the findings follow. The audit JSON is also in `artifacts/audit/audit.json`.
        """),
        code("""\
        ops = display.table(result.evidence.get("ops", []),
                            ["op", "calls", "classification", "category", "dtypes", "module_paths"])
        ops
        """),
        code("""\
        display.table(result.evidence.get("findings", []),
                      ["severity", "category", "op", "calls", "module_paths", "remedy"])
        """),
        md("""\
        ### Filter the op table

        In JupyterLab, pick a category or classification, or type part of a module path (say `mlp` or
        `layers.0`), to see only those ops. The table above is the same data, unfiltered.
        """),
        code('display.filter_widget(ops, by=["category", "classification"], text_column="module_paths")'),
        next_steps("""\
        ## Next

        Blockers first: each remedy says what to change in the model. Then open **04_compile**: the ops that
        run natively in eager mode are the ones `torch.compile` can fuse into one graph.
        """),
        code(CHECKED_SUMMARY),
    ]


def profiling() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 05 · Profiling: where the time goes on the device

        A model that runs correctly (02) and compiles (04) is ready to be made fast, and the first question is
        where its time goes. TorchNeuron plugs into the standard `torch.profiler`: `NeuronConfig` extends it
        with device and runtime capture, device activity is reported as `ProfilerActivity.PrivateUse1`, and
        `NeuronProfiler(...).export_trace` writes a trace for Neuron Explorer plus Parquet tables (per-op and
        per-engine metrics meant for scripts, or an agent, to analyse). This notebook profiles the forward pass
        on `neuron` and lists the hottest ops.
        """),
        parameters_cell("""\
        device: str = "neuron"  # the NeuronCore to profile on, e.g. "neuron:0"
        steps: int = 5          # profiled forward passes (and as many plain, timed ones to measure overhead)
        warmup: int = 3         # unprofiled passes first: the docs ask for at least 3
        top: int = 15           # ops kept in the stage record, by device time
        """),
        setup_cell("profile"),
        md("""\
        ## The profiler recipe

        This is the documented recipe, and what `profile.run` runs for you after `warmup` iterations (so that
        first-call NEFF compilation never shows up as a hot spot):

        ```python
        from torch.profiler import ProfilerActivity
        from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

        nc = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=OUTPUT_DIR,
                          capture_enabled_for_nc="0", correlate_device_time=True)
        with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                    experimental_config=nc, on_trace_ready=NeuronProfiler(nc).export_trace) as prof:
            ...
        print(prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=4))
        ```

        The trace and the Parquet tables go to `run_dir/artifacts/profile/`.
        """),
        code("""\
        result = profile.run(params, device=device, steps=steps, warmup=warmup, top=top)
        display.show(result)
        """),
        md("""\
        ## How to read it

        - **Top ops** are sorted by device time. `est_trn2_us` is a roofline estimate from Trainium2's published
          peak FLOP/s and HBM bandwidth, and `bound` says which of the two limits the op. On the simulator the
          device time is the host executing the op: read the ranking and the bound, not the absolute numbers.
        - **CPU fallbacks** ran on the host and copied `bytes_copied` across on every call: the first thing to
          remove when a fallback op ranks high.
        - **Overhead** compares profiled and plain step times: a ratio far above 1 means the profile distorts
          short ops.
        - Open `trace.json` in Perfetto (ui.perfetto.dev) or `chrome://tracing`; on Trainium, the profile
          directory opens in Neuron Explorer, which links each event to its source line.
        """),
        code("""\
        display.table(result.evidence.get("top_ops", []))
        """),
        md("""\
        The Parquet tables are the raw material: one row per op execution, ready for pandas (or for an agent
        hunting for bottlenecks).
        """),
        code("""\
        import pandas as pd

        events = pd.read_parquet(result.evidence["parquet_path"]) if "parquet_path" in result.evidence else None
        events.head() if events is not None else "no profile: the stage did not run"
        """),
        next_steps("""\
        ## Next

        Open **06_report** for the verdict across all stages, rendered as a single `report.html`.
        """),
        code(CHECKED_SUMMARY),
    ]


def report() -> list[nbformat.NotebookNode]:
    return [
        md("""\
        # 06 · Report: the migration verdict, from the run's records

        Every stage left one record in `run_dir/stages/`. This notebook renders them into the migration
        report, one self-contained `report.html` (open it in any browser, attach it to a ticket) and its
        machine-readable twin `report.json`, and shows the verdict here. The report reads only those records:
        it never re-runs a model, and it never claims more than the records hold.
        """),
        parameters_cell(run_parameters=REPORT_PARAMETERS),
        code("""\
        import json

        from neuronkit.report import report
        from neuronkit.workbook import display

        paths = report(run_dir)
        verdict = json.loads(paths.json.read_text())
        """),
        md("""\
        ## The verdict

        - **Ready**: every stage passed; the model runs on `neuron` with parity against the CPU and every
          audited op runs natively.
        - **Ready with CPU fallbacks**: it runs with parity, with caveats to plan for: ops that fall back to the
          CPU, recompiles, emulated dtypes.
        - **Blocked**: the audit found first-release blockers, or eager parity failed. The reasons name what must
          change.
        - **Incomplete**: a stage errored, was skipped or has no record, so the run cannot be judged yet. Fix the
          first failing stage (its traceback is in the report) and run again.
        """),
        code("""\
        print("verdict:", verdict["verdict_label"])
        for reason in verdict["reasons"]:
            print(" -", reason)
        display.report_link(paths.html)
        """),
        md("""\
        ## Compare the stages

        One row per stage: its status, its one-sentence summary and how long it took. The second table lines
        up the numbers the stages share so you can see where time and accuracy go as the model moves from CPU
        to eager to compiled: step times (CPU forward; eager and compiled forward on the device, both measured
        by notebook 04), the largest parity error against each stage's reference (eager against the CPU,
        compiled against eager) and how many CPU-fallback ops each stage saw. In JupyterLab, the widget shows
        two stages' full evidence side by side.
        """),
        code("""\
        display.table([{"stage": stage, **card} for stage, card in verdict["stages"].items()],
                      ["stage", "status", "summary", "duration_s"])
        """),
        code("display.comparison(run_dir)"),
        code("display.compare_widget(run_dir)"),
        md("""\
        ## Next

        Share `report.html`. To repeat the run (on Trainium, or after changing the model), use the command in
        the report's *Reproduce* section. For a run whose notebooks were executed by `neuronkit run`, the
        executed notebooks with their outputs are in `artifacts/notebooks/`.

        The last cell prints the verdict and each stage's status, which CI checks with nbval.
        """),
        code("""\
        # NBVAL_CHECK_OUTPUT
        print("verdict:", verdict["verdict_label"])
        for stage, card in verdict["stages"].items():
            print(f"{stage}: {card['status']}")
        """),
    ]


NOTEBOOKS = {
    "00_environment.ipynb": environment,
    "01_cpu_baseline.ipynb": cpu_baseline,
    "02_eager_on_neuron.ipynb": eager_on_neuron,
    "03_op_audit.ipynb": op_audit,
    "04_compile.ipynb": compile_notebook,
    "05_profiling.ipynb": profiling,
    "06_report.ipynb": report,
}


def build(name: str) -> nbformat.NotebookNode:
    """One clean notebook: stable cell ids, no outputs, no execution counts, the `neuronkit` kernel."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    nb.cells = NOTEBOOKS[name]()
    for index, cell in enumerate(nb.cells):
        cell.id = f"nb{name[:2]}-{index:02d}"
    nbformat.validate(nb)
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report notebooks that differ; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        text = nbformat.writes(build(name)) + "\n"
        path = HERE / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run python notebooks/build_notebooks.py): " + ", ".join(stale), file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
