"""A fork server for the tests' Python snippets (tests/conftest.py's `forked_python`), run as
`python -c "$(cat tests/fork_server.py)"` so that its `sys.path[0]` is the working directory, as a snippet's is.

It imports torch once with TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch is imported, neuronkit and its device are not
(checked below). Each request forks a child that takes over its own environment, working directory and output
files, then loads the device backends the way `import torch` does at its end (torch/__init__.py:
`if _is_device_backend_autoload_enabled(): _import_device_backends()`, reading TORCH_DEVICE_BACKEND_AUTOLOAD from
the child's environment), and runs the snippet as `python -c` would (a traceback and exit status 1 on an
exception, SystemExit's code). So every variable the device reads when it is installed or first used is read
in the child, whose device state (core count, HBM budget, NEFF cache, streams) is created there and dies with
it: nothing of one snippet reaches the next. What a fork cannot show is anything decided before torch's import
ends (torch's own start-up variables, an import order, autoload during `import torch` itself): requests whose
environment differs from the server's in a variable outside ALLOWED are refused, and tests of those keep a
fresh interpreter (`run_python`).

Protocol: one JSON request per line on stdin ({"code", "env", "cwd", "stdout", "stderr"}: the two output file
paths); replies on stdout, {"pid": N} when the child is forked, then {"rc": status} or {"refused": reason}.
"""

import atexit
import json
import os
import signal
import sys
import types

# Variables read only when the device is installed or used, never while torch is imported: the device's and
# runtime's own, pytest's per-test ones, the terminal's size (read by shutil.get_terminal_size when called),
# torch's inductor cache directory (written at first use), and PYTHONPATH, whose entries the child puts where
# the interpreter would (right after the working directory).
ALLOWED = ("NEURON", "TORCH_NEURONX_", "PYTEST_", "COLUMNS", "LINES", "TORCHINDUCTOR_CACHE_DIR",
           "TORCH_DEVICE_BACKEND_AUTOLOAD", "PYTHONPATH")


def _refusal(env: dict) -> str | None:
    """Why a snippet with this environment needs a fresh interpreter, or None."""
    changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))
    outside = [k for k in changed if not k.startswith(ALLOWED)]
    if outside:
        return f"{', '.join(outside)} may be read while torch is imported: run it in a fresh interpreter"
    return None


def _run_child(request: dict) -> None:
    """In the forked child: take over the request's process state, load the device, run the snippet, exit."""
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdin = open(os.devnull)
    added = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep)
             if p and p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    sys.path[1:1] = added
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = ["-c"]
    rc = 0
    try:
        if torch._is_device_backend_autoload_enabled():
            torch._import_device_backends()
        exec(compile(request["code"], "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            rc = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            rc = 1
    except BaseException as exc:  # as the interpreter reports it, without this function's frame
        sys.excepthook(type(exc), exc, exc.__traceback__.tb_next)
        rc = 1
    atexit._run_exitfuncs()  # as an interpreter that ends does; the server's own loop must not go on
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import torch  # noqa: E402 - after the switch above

assert not hasattr(torch, "neuron") and not any(m.startswith("neuronkit") for m in sys.modules), "device loaded"
# The server's threads at each fork, counted in the parent right after it, once the libraries' atfork handlers
# have run (numpy's OpenBLAS joins its pool in one): a fork copies only the forking thread, so a child forked
# beside another thread (which may hold a lock the child then waits on) is killed and the request refused.
AT_FORK: list[int] = []
os.register_at_fork(after_in_parent=lambda: AT_FORK.append(len(os.listdir("/proc/self/task"))))
replies = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing the server prints can corrupt the replies
for line in sys.stdin:
    request = json.loads(line)
    reason = _refusal(request["env"])
    if reason:
        replies.write(json.dumps({"refused": reason}) + "\n")
        continue
    pid = os.fork()
    if pid == 0:
        try:
            replies.close()
            _run_child(request)
        finally:
            os._exit(70)  # a child never returns to the server's loop, even if taking over its state failed
    if AT_FORK[-1] != 1:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        replies.write(json.dumps({"refused": f"the server had {AT_FORK[-1]} threads when it forked"}) + "\n")
        continue
    replies.write(json.dumps({"pid": pid}) + "\n")
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
