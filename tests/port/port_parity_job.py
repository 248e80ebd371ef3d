"""One process of the port corpus's parity runs (tests/port/test_port_corpus.py): `neuronkit.port.bootstrap` as
`--run` starts it, optionally with the processes the script spawns forked instead of spawned.

    python -u -m port_parity_job [--fork-spawns] BOOTSTRAP-ARGS...

Forking is test machinery, the same trade as the session's rank server (tests/conftest.py): a spawned child is a
fresh interpreter importing torch (~2 CPU-s each); a forked one starts from this process, which has imported
torch and installed the device but not started it (the device refuses a fork only after it has started).
`neuronkit port --run` itself spawns them as the script asks (tests/port/test_port.py runs one so).
"""

import sys


def fork_spawns() -> None:
    """torch.multiprocessing.spawn / start_processes start their processes with fork."""
    import torch.multiprocessing

    spawn_module = sys.modules["torch.multiprocessing.spawn"]
    start = spawn_module.start_processes

    def forked(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        return start(fn, args, nprocs, join, daemon, "fork")

    spawn_module.start_processes = forked
    torch.multiprocessing.start_processes = forked


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] == "--fork-spawns":
        fork_spawns()
        argv = argv[1:]
    from neuronkit.port import bootstrap

    sys.exit(bootstrap.main(argv))
