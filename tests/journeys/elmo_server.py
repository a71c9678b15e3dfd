"""A fast ``elmo`` for the journeys: one process imports torch and the package once and forks per command.

The docs' blocks call ``elmo`` about 30 times; each real start spends about 3 s importing torch (2.5 s of the
3.5 s of ``elmo --help`` on the 2-core development machine), which alone would exceed the suite's time budget.
So the work directory's PATH starts with a shim named ``elmo`` that hands its arguments, working directory,
environment and standard streams (the file descriptors themselves) to this server; the server forks, and the
child runs ``elmo.cli.main`` exactly as the console script does, then reports its exit status. Python snippets go
through the same server (``python FILE``). The console script itself is tested by tests/test_packaging.py.

Each command runs in its own forked child, so no state leaks from one command to the next. What a fork cannot
redo is what torch read at import: the server's environment sets that (TORCH_COMPILE_DISABLE, see conftest.py).
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import socket
import sys
import traceback

SHIM = """#!{python}
import json, os, socket, sys
server = socket.socket(socket.AF_UNIX)
server.connect(os.environ["ELMO_JOURNEY_SERVER"])
request = {{"argv": ["{name}", *sys.argv[1:]], "cwd": os.getcwd(), "env": dict(os.environ)}}
socket.send_fds(server, [json.dumps(request).encode()], [0, 1, 2])
server.shutdown(socket.SHUT_WR)
status = server.makefile().read()
sys.exit(int(status) if status else "elmo journey server: the command died without an exit status")
"""


def write_shim(directory: str, name: str) -> None:
    """An executable ``directory/name`` that runs ``name ARGS`` (``elmo`` or ``python``) in the server."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(SHIM.format(python=sys.executable, name=name))
    os.chmod(path, 0o755)


def serve(address: str) -> None:
    import elmo.cli  # the expensive import, once

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(address)
    listener.listen()
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        if os.fork() == 0:
            try:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _run(connection, elmo.cli.main)
            finally:  # never back into the loop: a child that failed before reporting leaves the client an EOF
                os._exit(1)
        connection.close()


def _run(connection: socket.socket, main) -> None:
    """In the forked child: take over the client's streams, directory and environment; run; report; exit."""
    message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while chunk := connection.recv(1 << 16):
        message += chunk
    request = json.loads(message)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "OMP_NUM_THREADS" in os.environ:
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    sys.argv = list(request["argv"])
    try:
        if sys.argv[0] == "python":
            sys.argv = sys.argv[1:]
            sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
            runpy.run_path(sys.argv[0], run_name="__main__")
            status = 0
        else:
            status = main()
    except SystemExit as e:  # as the interpreter takes it: None means 0, a message is printed and means 1
        if e.code is None or isinstance(e.code, int):
            status = e.code
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    connection.sendall(str(status or 0).encode())
    os._exit(0)


if __name__ == "__main__":
    serve(sys.argv[1])
