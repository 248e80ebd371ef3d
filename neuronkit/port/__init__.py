"""`neuronkit port`: bring your training script. A static pass (libcst) lists every CUDA-specific use with its
category (rewrite / decide / blocker), the TorchNeuron remedy and its source; the mechanical fixes make a
rewritten copy; `run_script` runs that copy on the simulated device for N optimizer steps.

    from neuronkit.port import scan_paths, table, run_script
    scans = scan_paths(["train.py"]); print(table(scans)); print(scans[0].diff())
    result = run_script(scans[0], steps=20, script_args=["--model", "..."])
"""

from neuronkit.port.output import scan_record, summary_line, table
from neuronkit.port.run import RunResult, run_script, run_summary
from neuronkit.port.scan import FileScan, scan_paths, scan_source

__all__ = ["FileScan", "RunResult", "run_script", "run_summary", "scan_paths", "scan_record", "scan_source",
           "summary_line", "table"]
