"""The tests' torchrun ranks, forked from one warm server: the notebooks' kernel fork server
(`neuronkit.kernels.fork_server`) serving a role of its own, which forks plain Python commands.

`CommandServer.executable` stands in for the interpreter (torchrun's PYTHON_EXEC, tests/conftest.py): it asks
the server to fork `python ARGS`, or runs a real interpreter when the server declines. The server imports
the modules it is given with the device's autoload off, and each child runs its command as the interpreter
would (`interpreter`, beside this file), loading the device itself; its environment may differ from the
server's only in the variables it is given (read when used, not when imported), and what it forks and
declines is noted in a log file (the command's own stderr is the requester's).

    python -u tests/kernels/rank_server.py FD DIR PID --import=MOD... --may-differ=PREFIX... --log=FILE
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# torch's switch for loading device backends when it is imported: off in the server, whose children load them
# (interpreter.run) under their own environment; so it may differ in a command's, as may PYTHONPATH, whose
# entries the child adds itself (interpreter.added_path).
AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"


@functools.cache
def _fork_server() -> Any:
    """neuronkit/kernels/fork_server.py, loaded by path: importing the package would import torch, which
    pytest-xdist's controller process (which starts this server) never pays for."""
    import importlib.util

    path = HERE.parents[1] / "neuronkit" / "kernels" / "fork_server.py"
    spec = importlib.util.spec_from_file_location("_neuronkit_fork_server", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def available() -> bool:
    """Whether commands can be forked here (Linux)."""
    return _fork_server().available()


def CommandServer(env: dict[str, str], imports: tuple[str, ...], may_differ: tuple[str, ...], log: str) -> Any:
    """A started server that forks Python commands (`python -u -m MODULE ...`, a script, `-c CODE`):
    `executable` runs `python ARGS` through it, or in a real interpreter when it declines. It imports `imports`
    under `env` with the device's autoload off and PYTHON_EXEC set to `executable`; it forks a command whose
    environment differs from that only in variables starting with one of `may_differ`, and notes each fork and
    decline in file `log`. `close()` stops it."""
    fork_server = _fork_server()
    server = fork_server.Server("neuronkit-python-")
    # The launcher's `launch`, with its socket, run by this interpreter (-I -S); not through a shell, which
    # would change the environment (PWD) the server compares and the command gets.
    server.executable = str(server._dir / "python")
    Path(server.executable).write_text(
        f"#!{sys.executable} -IS\nimport importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('launcher', {str(fork_server.LAUNCHER)!r})\n"
        "launcher = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(launcher)\n"
        f"sys.exit(launcher.launch({server.socket!r}, sys.argv[1:], "
        "lambda args: os.execv(sys.executable, [sys.executable, *args])))\n")
    os.chmod(server.executable, 0o755)
    server._start({**env, AUTOLOAD: "0", "PYTHON_EXEC": server.executable},
                  [*(f"--import={m}" for m in imports), *(f"--may-differ={p}" for p in may_differ), f"--log={log}"],
                  interpreter_options=("-u",), program=(str(Path(__file__).resolve()),))
    return server


def _role(fork_server: Any, options: argparse.Namespace) -> Any:
    """The server's role: fork commands, each run by `interpreter` as a fresh interpreter would."""
    import interpreter

    class Commands(fork_server.Role):
        what = "interpreter"

        def __init__(self) -> None:
            self.imports = tuple(options.imports)
            self.idle_imports = ()
            self.may_differ = (*options.may_differ, AUTOLOAD, "PYTHONPATH")

        def note(self, line: str, request: dict[str, Any] | None = None, declined: bool = False) -> None:
            """Each fork and decline, with the command's arguments, in the log file (the command's own stderr is
            the requester's)."""
            with open(options.log, "a") as log:
                log.write(f"{os.getpid()} {'declined: ' if declined else ''}{line}: "
                          f"{json.dumps(request['argv'] if request else None)}\n")

        def prepare(self) -> None:
            pass

        def ready(self) -> bool:
            """Serve nothing when the device was loaded while importing (autoload left on): a command's device
            must read its own environment; each launcher then runs a real interpreter (noted in the log)."""
            torch = sys.modules.get("torch")
            loaded = torch is not None and (hasattr(torch, "neuron") or any(m.startswith("neuronkit.device")
                                                                            for m in sys.modules))
            if loaded:
                self.note(f"the device was loaded while importing ({AUTOLOAD}={os.environ.get(AUTOLOAD)}): serving nothing")
            return not loaded

        def decline(self, imported_under: dict[str, str], settled: dict[str, str],
                    request: dict[str, Any]) -> str | None:
            """A command may also carry a variable with the value the imports set it to themselves (torch._dynamo
            writes its default TORCHINDUCTOR_CACHE_DIR into the environment when imported: so does every process
            that imported it, and the torchrun that starts a rank inherits it), which a fresh interpreter would
            read and keep as it is; and its command line must be one a fork can stand in for."""
            differ = [k for k in fork_server.differences(imported_under, request["env"], self.may_differ)
                      if request["env"].get(k) != settled.get(k)]
            if differ:
                return (f"the command's environment sets {', '.join(differ)} otherwise than the server imported "
                        "under: starting an ordinary interpreter")
            command = interpreter.parse(request["argv"], request["cwd"], request["env"])
            if isinstance(command, str):
                return f"{command}: starting an ordinary interpreter"
            request["command"] = command
            return None

        def become(self, request: dict[str, Any]) -> None:
            """Run the request's command as the interpreter would; never returns. The command imports neuronkit
            itself, as in a fresh interpreter (the server imported the package to serve: nothing of it is kept)."""
            fork_server._take_over(request)
            interpreter.forget_own()
            interpreter.run(request["command"], request["argv"])

    return Commands()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -u tests/kernels/rank_server.py")
    parser.add_argument("fd", type=int)
    parser.add_argument("dir")
    parser.add_argument("parent", type=int)
    parser.add_argument("--import", dest="imports", action="append", default=[])
    parser.add_argument("--may-differ", action="append", default=[])
    parser.add_argument("--log")
    options = parser.parse_args(argv)
    fork_server = _fork_server()
    role = _role(fork_server, options)
    if sys.path and sys.path[0] == str(HERE):  # the script's folder: no command's sys.path has it
        del sys.path[0]
    fork_server.serve(role, options.fd, options.dir, options.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
