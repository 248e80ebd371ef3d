"""`neuronkit run` on a large checkpoint (made by `bench/make_big_checkpoint.py`): wall time, peak memory.

One `neuronkit run CKPT --out DIR --dtype bfloat16` (extra flags after `--`), with the process tree's
memory sampled every 0.5 s from /proc: the largest resident set of any one process (a notebook kernel,
the runner, the fork server) and the largest sum over the tree; and the tree's CPU seconds (user + system
of every process it waited for: on a shared machine, the figure wall time is not). Prints and writes one JSON record
(`--json`), with the 1-minute load average before and after: the machine is shared, read every figure
with its load.

    python bench/bench_big_checkpoint.py /work/bigckpt/llama-1b --json bench/big-llama-1b.json
    python bench/bench_big_checkpoint.py /work/bigckpt/llama-1b --layers 1 --cell-timeout 1200
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

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


def measure(command: list[str]) -> dict[str, object]:
    """Run `command`, sampling its process tree's memory; wall time, peaks and the output's last lines."""
    load_before = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak_one = peak_sum = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_one, peak_sum
        while not done.is_set():
            sizes = tree_rss(proc.pid)
            if sizes:
                peak_one, peak_sum = max(peak_one, max(sizes.values())), max(peak_sum, sum(sizes.values()))
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.communicate()[0]
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = {"user": after.ru_utime - before.ru_utime, "sys": after.ru_stime - before.ru_stime}
    return {"command": command, "exit_code": proc.returncode, "wall_s": round(time.perf_counter() - start, 1),
            "cpu_s": round(cpu["user"] + cpu["sys"], 1), "cpu_user_s": round(cpu["user"], 1),
            "peak_rss_process_gb": round(peak_one / 1e9, 2), "peak_rss_tree_gb": round(peak_sum / 1e9, 2),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
            "output": output.strip().splitlines()[-12:]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json", type=Path, default=None, help="also write the record here")
    args, extra = parser.parse_known_args(argv)  # the rest: more `neuronkit run` flags
    out = Path(tempfile.mkdtemp(prefix="nk-big-")) / "run"
    neuronkit = Path(sys.executable).with_name("neuronkit")
    record = measure([str(neuronkit), "run", str(args.checkpoint), "--out", str(out), "--dtype", args.dtype,
                      *[flag for flag in extra if flag != "--"]])
    record["run_dir"] = str(out)
    text = json.dumps(record, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
