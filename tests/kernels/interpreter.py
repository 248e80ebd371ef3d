"""What `python -u (-m MODULE | -c CODE | SCRIPT) ARGS...` does once the interpreter has started, done in a
process forked from the tests' rank server (rank_server.py, beside this file) instead of a fresh interpreter:
torchrun's worker processes in the tests, whose command is `[$PYTHON_EXEC, "-u", script-or-"-m module", ...]`.

`parse` reads the arguments the way the interpreter does, for the commands a fork can stand in for (anything
else, e.g. another interpreter option, is declined and runs in a real interpreter); `run` executes one in
the forked child, whose streams, working directory and environment are already the requester's:

- `sys.argv`, `sys.path[0]` and `__main__` as the interpreter sets them: `-m` runs through
  `runpy._run_module_as_main` (what the interpreter itself calls), with the working directory first on
  `sys.path`; `-c` with `''` first; a script with its real directory first, as `__main__` with its
  `__file__`;
- the device backends are loaded as `import torch` loads them at its end (torch/__init__.py:
  `if _is_device_backend_autoload_enabled(): _import_device_backends()`), reading this process's
  environment: the server imported torch with TORCH_DEVICE_BACKEND_AUTOLOAD=0, so every variable the
  device reads when it is installed (LOCAL_RANK, NEURON_RT_VISIBLE_CORES, ...) is read here, with the
  command's sys.path and sys.argv already set, before the command's first line (a command that changes them before it imports torch would be seen otherwise: none
  of the tests' does);
- the default generators reseeded from the OS, as a fresh process seeds them (torch seeds its CPU generator
  at start-up; Python's `random` reseeds itself after a fork);
- the end as the interpreter's: SystemExit's code (None 0, an int itself, anything else printed, 1), an
  uncaught exception's traceback and status 1 (KeyboardInterrupt: killed by SIGINT), then non-daemon
  threads joined, atexit handlers run and the streams flushed (status 120 if that fails), then `os._exit`.

PYTHONPATH may add entries before the server's own (`path`): the child puts them where the interpreter
would (after sys.path[0]), unless one holds a module of the same name as one the server imported and the
child keeps (which a fresh interpreter would have taken from there; neuronkit itself is imported afresh,
`forget_own`), or a sitecustomize/usercustomize, or is relative.

What still differs from a fresh interpreter, knowingly: the modules the server imported are imported
already, before the device was installed (the server imports only modules that read no per-rank variable
and look at no device when imported); every fork shares the server's string-hash secret (a fresh
interpreter draws its own unless PYTHONHASHSEED is set); `sys.flags.unbuffered` reads 0; the process's
parent is the server, not the launcher (which stands in for it: signals, exit status).

Output is unbuffered only: the server itself runs with `-u` (its streams, which the child keeps on its new
descriptors, are decided at start-up), so a command without `-u` (or PYTHONUNBUFFERED) is declined.
"""

from __future__ import annotations

import atexit
import builtins
import importlib.machinery
import io
import os
import runpy
import signal
import sys
import threading
import types
from dataclasses import dataclass
from typing import NoReturn

KINDS = {"-m": "module", "-c": "code"}
# The package the server imported only to run itself: a forked command imports it afresh (`forget_own`).
OWN = "neuronkit"
# The distribution's start-up hook (`import nki` before torch, neuronkit-nki.pth): stateless, it imports neuronkit
# only when `nki` is, from wherever the command's sys.path finds it, so the server's copy serves any checkout.
OWN_HOOK = "_neuronkit_nki"


@dataclass(frozen=True)
class Command:
    """A parsed `python` command line: `kind` is module, code or script; `target` the module name, the code
    or the script's path as given; `args` what follows it (sys.argv[1:]); `path` the PYTHONPATH entries it
    adds to the server's."""

    kind: str
    target: str
    args: tuple[str, ...]
    path: tuple[str, ...] = ()


def parse(argv: list[str], cwd: str, env: dict[str, str]) -> Command | str:
    """The command `python ARGV` runs in directory `cwd` with environment `env`, or why a fork cannot stand in
    for it (a line for the server's log). Called in the server, whose environment and modules it compares."""
    path = added_path(env.get("PYTHONPATH", ""), os.environ.get("PYTHONPATH", ""))
    if isinstance(path, str):
        return path
    options = 0
    while options < len(argv) and argv[options] == "-u":
        options += 1
    if not options and not env.get("PYTHONUNBUFFERED"):
        return "buffered output (no -u): the server's streams are unbuffered"
    if options == len(argv):
        return "no command: an interactive interpreter"
    head, rest = argv[options], argv[options + 1:]
    if head in KINDS:
        return Command(KINDS[head], rest[0], tuple(rest[1:]), path) if rest else f"{head} without its argument"
    if head.startswith("-"):
        return f"interpreter option {head}"
    if not os.path.isfile(os.path.join(cwd, head)):  # a directory, a zip, or missing: python says which
        return f"{head} is not a file"
    return Command("script", head, tuple(rest), path)


def added_path(requested: str, served: str) -> tuple[str, ...] | str:
    """The entries PYTHONPATH `requested` adds before the server's `served`, or why they cannot be added to a
    process that has imported already (see the module docstring)."""
    entries, own = requested.split(os.pathsep) if requested else [], served.split(os.pathsep) if served else []
    if entries[len(entries) - len(own):] != own:
        return f"PYTHONPATH {requested!r} does not end with the server's {served!r}"
    added = tuple(entries[:len(entries) - len(own)])
    imported = {name.partition(".")[0] for name in sys.modules} - {OWN, OWN_HOOK} | {"sitecustomize", "usercustomize"}
    for entry in added:
        if not os.path.isabs(entry):
            return f"PYTHONPATH entry {entry!r} is relative"
        try:
            names = {name.partition(".")[0] for name in os.listdir(entry)}
        except OSError:
            continue  # a missing directory: the interpreter finds nothing there either
        if names & imported:
            return f"PYTHONPATH entry {entry} holds {', '.join(sorted(names & imported))}, imported by the server"
    return added


def forget_own() -> None:
    """Drop this package's modules, which the server imported to run itself: the command imports it as a
    fresh interpreter would, from wherever its sys.path finds it first (a PYTHONPATH entry it adds included)."""
    for name in [m for m in sys.modules if m == OWN or m.startswith(f"{OWN}.")]:
        del sys.modules[name]


def run(command: Command, argv: list[str]) -> NoReturn:
    """Run `command` (parsed from `argv`) in this forked process as the interpreter would, and exit as it
    would: never returns."""
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.orig_argv = [sys.executable, *argv]
    _reseed()
    _start(command)  # before the device loads: its import finds neuronkit where the command's sys.path does
    try:
        torch = sys.modules.get("torch")
        if torch is not None and torch._is_device_backend_autoload_enabled():
            torch._import_device_backends()
        _execute(command, main)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - reported as the interpreter reports it
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:  # not this module's frames
            tb = tb.tb_next
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # it prints the exception's own traceback
        code = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    os._exit(_finish(code))


def _reseed() -> None:
    """Seed the default generators as a fresh process does (from the OS), not as the server's copies."""
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    if "torch" in sys.modules:
        sys.modules["torch"].default_generator.seed()


def _start(command: Command) -> None:
    """Set sys.argv and sys.path as the interpreter has them for `command` when it starts."""
    sys.path[0:0] = command.path
    if command.kind == "module":
        sys.argv = ["-m", *command.args]  # runpy puts the module's path in sys.argv[0]
        sys.path.insert(0, os.getcwd())
    elif command.kind == "code":
        sys.argv = ["-c", *command.args]
        sys.path.insert(0, "")
    else:
        sys.argv = [command.target, *command.args]
        sys.path.insert(0, os.path.dirname(os.path.realpath(os.path.abspath(command.target))))


def _execute(command: Command, main: types.ModuleType) -> None:
    """Run `command` in `main` (sys.argv and sys.path set: `_start`)."""
    if command.kind == "module":
        runpy._run_module_as_main(command.target, alter_argv=True)
    elif command.kind == "code":
        exec(compile(command.target, "<string>", "exec"), main.__dict__)
    else:
        path = os.path.abspath(command.target)
        main.__file__, main.__cached__ = path, None
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
        with io.open_code(path) as source:
            code = compile(source.read(), path, "exec")
        exec(code, main.__dict__)


def _exit_code(exc: SystemExit) -> int:
    """The status the interpreter exits with for an uncaught SystemExit (printing a non-integer code)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _finish(code: int) -> int:
    """What the interpreter does before it exits: join non-daemon threads, run atexit handlers, flush the
    streams. The status to exit with (a negative one: this process kills itself with that signal)."""
    threading._shutdown()  # the interpreter's own wait for non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            code = 120
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code & 0xFF
