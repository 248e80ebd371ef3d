"""`neuronkit port`: bring your training script. A static pass (libcst) follows the script into the local
modules it imports and lists every CUDA- or PyTorch/XLA-specific use with its category (rewrite / decide /
blocker), the TorchNeuron remedy and its source; the rewrites that keep every path the script took make a
rewritten copy; `run_script` runs that copy on the simulated device for N optimizer steps.

    from neuronkit.port import scan_project, table, run_script
    project = scan_project(["train.py"]); print(table(project.scans, not_scanned=project.not_scanned))
    print(project.scans[0].diff())
    result = run_script(project, steps=20, script_args=["--model", "..."])
"""

from neuronkit.port.output import scan_record, summary_line, table
from neuronkit.port.run import RunResult, run_script, run_summary
from neuronkit.port.scan import FileScan, NotScanned, Project, scan_paths, scan_project, scan_source

__all__ = ["FileScan", "NotScanned", "Project", "RunResult", "run_script", "run_summary", "scan_paths", "scan_project",
           "scan_record", "scan_source", "summary_line", "table"]
