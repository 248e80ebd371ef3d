"""`neuronkit run` on large checkpoints (made by `bench/make_big_checkpoint.py`): wall time, CPU, peak memory.

One `neuronkit run CKPT --out DIR --dtype bfloat16` per checkpoint (extra flags after `--`), with the process
tree's memory sampled every 0.5 s from /proc:
- the largest resident set of any one process (a notebook kernel, the runner, the fork server);
- the largest sum of resident sets over the tree, which counts the pages forked kernels share with the fork
  server once per kernel;
- the largest sum of proportional sets (Pss: each page once) over the tree, and that per notebook (which one
  is the heaviest);
and the tree's CPU seconds (user + system of every process it waited for: on a shared machine, the figure wall
time is not). One row per checkpoint in bench/results/big_checkpoint.json (bench/harness.py), with the 1-minute
load average before and after each run: the machine is shared, read every figure with its load.

    python bench/bench_big_checkpoint.py /work/bigckpt/llama-1b /work/bigckpt/llama-8b
    python bench/bench_big_checkpoint.py /work/bigckpt/llama-1b -- --layers 1 --cell-timeout 1200
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness import Run

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> dict[int, int]:
    """Resident bytes of `root` and every descendant, by pid (from /proc; processes gone are skipped)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in rss:
            found[pid] = rss[pid]
        todo += children.get(pid, [])
    return found


def proportional(pid: int) -> int:
    """`pid`'s proportional set size in bytes (/proc/PID/smaps_rollup `Pss`): each shared page counted once
    over the processes sharing it. Kernels forked from the fork server share its imported libraries, so
    summing their resident sets counts those pages once per kernel; summing Pss does not. 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def measure(command: list[str]) -> dict[str, object]:
    """Run `command`, sampling its process tree's memory; wall time, peaks (overall, and the tree's per notebook,
    from the runner's `[k/N] notebook` lines) and the output's last lines."""
    load_before = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak_one = peak_sum = peak_pss = 0
    finished: list[str] = []  # the runner's line per notebook done; the one running is the next
    by_notebook: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_one, peak_sum, peak_pss
        while not done.is_set():
            sizes = tree_rss(proc.pid)
            if sizes:
                pss, running = sum(map(proportional, sizes)), len(finished)
                peak_one, peak_sum = max(peak_one, max(sizes.values())), max(peak_sum, sum(sizes.values()))
                peak_pss = max(peak_pss, pss)
                by_notebook[running] = max(by_notebook.get(running, 0), pss)
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if re.match(r"\[\d+/\d+\] ", line):
            finished.append(line.split()[1])
    proc.wait()
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = {"user": after.ru_utime - before.ru_utime, "sys": after.ru_stime - before.ru_stime}
    verdict = next((line.split(": ", 1)[1] for line in reversed(lines) if line.startswith("verdict: ")), None)
    peaks = {name: round(by_notebook.get(i, 0) / 1e9, 2) for i, name in enumerate(finished)}
    return {"command": command, "exit_code": proc.returncode, "verdict": verdict,
            "wall_s": round(time.perf_counter() - start, 1),
            "cpu_s": round(cpu["user"] + cpu["sys"], 1), "cpu_user_s": round(cpu["user"], 1),
            "peak_rss_process_gb": round(peak_one / 1e9, 2), "peak_rss_tree_gb": round(peak_sum / 1e9, 2),
            "peak_pss_tree_gb": round(peak_pss / 1e9, 2), "peak_pss_tree_gb_by_notebook": peaks,
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
            "output": lines[-12:]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", type=Path, nargs="+")
    parser.add_argument("--dtype", default="bfloat16")
    args, extra = parser.parse_known_args(argv)  # the rest: more `neuronkit run` flags
    neuronkit = Path(sys.executable).with_name("neuronkit")
    with Run("big_checkpoint", "Large checkpoints through `neuronkit run` (issue 21)",
             f"python bench/bench_big_checkpoint.py {' '.join(map(str, args.checkpoints))}") as run:
        run.columns(checkpoint="checkpoint", exit_code="exit", verdict="verdict", wall_s=("wall", "{:.0f} s"),
                    cpu_s=("CPU (tree)", "{:.0f} s"), peak_rss_process_gb=("peak RSS, one process", "{:.2f} GB"),
                    peak_rss_tree_gb=("sum of RSS, tree", "{:.2f} GB"),
                    peak_pss_tree_gb=("peak PSS, tree", "{:.2f} GB"), heaviest=("heaviest notebook (PSS)", "{}"),
                    load=("1-min load before → after", "{}"))
        for checkpoint in args.checkpoints:
            out = Path(tempfile.mkdtemp(prefix="nk-big-")) / "run"
            record = measure([str(neuronkit), "run", str(checkpoint), "--out", str(out), "--dtype", args.dtype,
                              *[flag for flag in extra if flag != "--"]])
            print("\n".join(record["output"]))
            peaks = record["peak_pss_tree_gb_by_notebook"]
            heaviest = max(peaks, key=peaks.get) if peaks else None
            run.row(checkpoint=checkpoint.name, exit_code=record["exit_code"], verdict=record["verdict"],
                    wall_s=record["wall_s"], cpu_s=record["cpu_s"], peak_rss_process_gb=record["peak_rss_process_gb"],
                    peak_rss_tree_gb=record["peak_rss_tree_gb"], peak_pss_tree_gb=record["peak_pss_tree_gb"],
                    heaviest=f"{heaviest} ({peaks[heaviest]:.2f} GB)" if heaviest else "—",
                    load=f"{record['load_before'][0]:.1f} → {record['load_after'][0]:.1f}")
        run.note = ("Random Llama-3-shaped checkpoints made by `bench/make_big_checkpoint.py` (bf16; 1B: 2.5 GB, "
                    "8B: 16 GB), run with `--dtype bfloat16` on this 2-core, 24 GB machine. Targets (issue 21): 8B "
                    "<= 15 min with peak RSS <= 8 GB (the tree's PSS is the memory the run holds), 1B <= 5 min. "
                    "CPU is user + system of the whole process tree; read wall time with the load. Earlier runs: "
                    "bench/HISTORY.md.")


if __name__ == "__main__":
    main(sys.argv[1:])
