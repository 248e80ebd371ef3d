"""The command a fork-server kernelspec runs: `python launcher.py SOCKET -f CONNECTION_FILE ...`.

Run by path, not as `-m neuronkit...` (the package imports torch, which is what the fork server saves):
standard library only. It asks the fork server (`neuronkit.kernels.fork_server`) listening on SOCKET to fork a
kernel with these arguments, this working directory, this environment and this process's stdin, stdout
and stderr; then it stands in for that kernel towards jupyter_client: the signals jupyter_client sends it
(interrupt, terminate) go to the kernel, and it exits as the kernel exits (same code, or killed by the
same signal), so the kernel manager's liveness polling, timeouts and watchdog see the kernel itself. When
the launcher is killed (SIGKILL cannot be forwarded) the server sees its connection close and kills the
kernel. When there is no server, or it declines (an environment the server did not import under), the
launcher becomes an ordinary kernel (`python -m ipykernel_launcher`), just slower to start.

`launch` does the same for another server's children, with their own fallback (the tests' torchrun ranks:
`python ARGS` forked, or this interpreter exec'd with ARGS).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from typing import Callable

# Request framing, shared with the server: a 4-byte length (sent with the three descriptors), then JSON.
HEADER = struct.Struct("!I")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _ordinary_kernel(arguments: list[str]) -> None:
    """Replace this process with a kernel started the usual way."""
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *arguments])


def _ask(path: str, arguments: list[str]) -> tuple[socket.socket, int] | None:
    """Send the fork request; the connection and the kernel's pid, or None when no kernel was forked."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        body = json.dumps({"argv": arguments, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
        conn.sendall(body)
        reply = _line(conn)
    except OSError:
        return None
    if len(reply) != 2 or reply[0] != "pid":
        conn.close()
        return None
    return conn, int(reply[1])


def _line(conn: socket.socket) -> list[str]:
    """One newline-terminated reply from the server, split in words ([] when the server went away)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            return []
        data += chunk
    return data.decode().split()


def main(argv: list[str]) -> int:
    """Launch a kernel through the server at argv[0] with the other arguments; its exit code."""
    return launch(argv[0], argv[1:], _ordinary_kernel)


def launch(path: str, arguments: list[str], ordinary: Callable[[list[str]], None]) -> int:
    """Ask the server at socket `path` to fork a child for `arguments`, forward signals to it, and return its
    exit code; `ordinary(arguments)` replaces this process when the server forks none."""
    forked = _ask(path, arguments)
    if forked is None:
        ordinary(arguments)
        return 1  # `ordinary` replaces this process
    conn, pid = forked

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    reply = _line(conn)
    if len(reply) != 2 or reply[0] != "exit":  # the server died: take the kernel with it
        forward(signal.SIGKILL, None)
        return 1
    code = int(reply[1])
    if code < 0:  # killed by a signal: end the same way, as the kernel process would have
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # the two whose handling cannot change
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code  # the signal's default action does not end a process (e.g. SIGCHLD)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
