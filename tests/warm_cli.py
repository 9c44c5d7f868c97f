"""`bertforge` commands started from a warm interpreter: the tests' way to run the CLI as a process without paying
for `import torch` each time (about 3 CPU-seconds per command; the doc pages alone run about 80 commands).

A server process imports bertforge once, then forks a child per command. The `bertforge` a test puts on PATH is a
small client (this file, run with `python -S`) that hands the server its argument list, working folder, environment
and its own stdin/stdout/stderr, and waits: its exit status is the command's. To the caller it behaves as the real
command's process would: signals sent to the client (SIGTERM, SIGINT, ...) reach the command, and when the client
dies (SIGKILL) the command is killed at once, so `kill -9 $PID` and a test's process-group clean-up work as on the
real process. The command runs `python -m bertforge`'s own code (`bertforge.__main__`) in the child, with a
fresh argument list, environment, working folder, standard streams, signal dispositions and torch thread count.

`BERTFORGE_TEST_COLD=1` turns this off: the client then runs `python -m bertforge` as a process of its own.
"""
from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SOCKET_ENV = "BERTFORGE_TEST_SERVER"
COLD_ENV = "BERTFORGE_TEST_COLD"
_server: dict[str, object] = {}
# What the commands import, loaded once by the server (a missing optional package is left out).
PRELOAD = ("bertforge.cli", "bertforge.tasks.finetune", "bertforge.tasks.predictor", "bertforge.pretraining",
           "bertforge.evaluation.glue", "bertforge.data.prepare", "bertforge.serving", "bertforge.generation",
           "safetensors.torch", "scipy.stats", "fastapi", "uvicorn",
           # the GLUE workers' warm-up: an optimizer built once (torch._dynamo), the metrics, matplotlib's fonts
           "bertforge.evaluation.preload")


# ---- the test process's side ------------------------------------------------------------------------------------
def write_wrapper(path: Path) -> Path:
    """A `bertforge` executable at `path` that runs commands through the warm server."""
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -S {Path(__file__).resolve()} \"$@\"\n")
    path.chmod(0o755)
    return path


def environment(env: dict[str, str]) -> dict[str, str]:
    """`env` with the address of this process's warm server (started on first use, stopped at exit)."""
    if os.environ.get(COLD_ENV):
        return dict(env, **{COLD_ENV: "1"})
    return dict(env, **{SOCKET_ENV: _start_server(env)})


def run(argv: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`bertforge ARGV` as a process of its own (its exit status, stdout and stderr as text) through the warm
    server: for tests of what a command's process prints and returns, not of how it starts. `kwargs` go to
    `subprocess.run` (cwd, timeout, input, ...)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1] / "src"),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.run([sys.executable, "-S", str(Path(__file__).resolve()), *argv], env=environment(env),
                          capture_output=True, text=True, **kwargs)


def _start_server(env: dict[str, str]) -> str:
    if _server.get("proc") is not None and _server["proc"].poll() is None:  # type: ignore[union-attr]
        return str(_server["address"])
    folder = Path(os.environ.get("TMPDIR", "/tmp"))
    address = str(folder / f"bertforge-warm-{os.getpid()}-{time.monotonic_ns()}.sock")
    log = open(folder / f"bertforge-warm-{os.getpid()}.log", "ab")
    server_env = dict(env)
    server_env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", address], env=server_env,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while not os.path.exists(address):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the warm bertforge server did not start (log: {log.name})")
        time.sleep(0.05)
    _server.update(proc=proc, address=address)
    import atexit
    atexit.register(_stop_server, proc, address, log)
    return address


def _stop_server(proc: subprocess.Popen, address: str, log) -> None:
    """Stop the server and remove its socket and its log, unless it had died by itself (the log says why)."""
    crashed = proc.poll() not in (None, 0)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    for path in (address, *([] if crashed else [log.name])):
        try:
            os.unlink(path)
        except OSError:
            pass


# ---- the server ---------------------------------------------------------------------------------------------------
def serve(address: str) -> None:
    """Import what every command imports, then fork a command per connection (never running one itself)."""
    import importlib
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if len(os.listdir("/proc/self/task")) > 1:  # a thread would not survive fork: say which import started it
        raise SystemExit("the warm bertforge server started threads while importing; it cannot fork safely")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # finished monitors are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address + ".new")
    listener.listen(64)
    os.rename(address + ".new", address)  # the address appears once it accepts
    parent = os.getppid()
    while True:
        if not select.select([listener], [], [], 1.0)[0]:
            if os.getppid() != parent:  # the test process is gone (killed): so is the need for this server
                os._exit(0)
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _monitor(conn)
        conn.close()


def _monitor(conn: socket.socket) -> None:
    """Receive one command, run it in a child, report the child's pid and then its exit status."""
    try:
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run_command(request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(struct.pack("!q", pid))
        _, status = os.waitpid(pid, 0)
        conn.sendall(struct.pack("!q", os.waitstatus_to_exitcode(status)))
    finally:
        os._exit(0)


def _run_command(request: dict, fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for signum in (*FORWARDED, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start-up
    os.setpgid(0, 0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _die_with(request["client"])
    code = 1
    try:
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
        sys.path[0] = os.getcwd()
        import torch
        threads = os.environ.get("OMP_NUM_THREADS")
        torch.set_num_threads(int(threads) if threads and threads.isdigit() else os.cpu_count() or 1)
        import runpy
        sys.argv = ["bertforge", *request["argv"]]
        runpy.run_module("bertforge", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        import atexit
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _die_with(client: int) -> None:
    """Kill this command as soon as its client process is gone (it was killed with SIGKILL, say)."""
    watch = os.pidfd_open(client)

    def wait() -> None:
        select.select([watch], [], [])
        os.killpg(0, signal.SIGKILL)  # the command and the workers it started, as a process group's end would
    threading.Thread(target=wait, daemon=True).start()


# ---- the client: `bertforge ARGS...` ----------------------------------------------------------------------------
def client(argv: list[str]) -> int:
    address = os.environ.get(SOCKET_ENV)
    if os.environ.get(COLD_ENV) or not address:
        os.execv(sys.executable, [sys.executable, "-m", "bertforge", *argv])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(address)
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "client": os.getpid()}
    request["env"].pop(SOCKET_ENV, None)
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    pid = struct.unpack("!q", _receive(conn, 8))[0]
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, _frame: os.kill(pid, signum))
    code = struct.unpack("!q", _receive(conn, 8))[0]
    if code < 0:  # ended by a signal: end the same way, as the shell expects
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _receive(conn: socket.socket, size: int) -> bytes:
    data = array.array("b")
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise SystemExit("bertforge (warm test server): the command's monitor went away")
        data.frombytes(chunk)
    return data.tobytes()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        sys.exit(client(sys.argv[1:]))
