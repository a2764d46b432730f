"""The process-tree launcher run in front of every command (issue 14 item 5); stdlib only, run as a script.

``python -I -S _reaper_main.py <grace_s> <env_fd> -- <argv...>`` makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so every descendant of the command that loses its parent — including
one that called ``setsid()`` and closed its stdio — is re-parented to this launcher instead of init. The
launcher forks and execs ``argv`` (same process group and cwd) with exactly the environment read from
``env_fd`` (``NAME=VALUE\\0`` records; ``-1``: its own), waits for it, then kills every
remaining descendant with SIGKILL and reaps them before exiting with the command's status (a command killed
by signal N makes the launcher die of signal N too). SIGTERM/SIGINT/SIGHUP to the launcher (the runner's
timeout or cancellation, or the death of the runner: ``PR_SET_PDEATHSIG``) send SIGTERM to the whole tree
and SIGKILL ``grace_s`` seconds later. Exit status 127 with a message on stderr when ``argv`` cannot be
executed; 125 when the subreaper cannot be set up.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXIT_EXEC_FAILED = 127
EXIT_SETUP_FAILED = 125
_KILL_ROUNDS_S = 5.0


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (by ``/proc/<pid>/stat`` parent links)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def signal_tree(sig: int) -> int:
    pids = descendants(os.getpid())
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return len(pids)


def reap_nowait() -> dict[int, int]:
    statuses: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return statuses
        if pid == 0:
            return statuses
        statuses[pid] = status


def kill_tree() -> None:
    """SIGKILL every descendant until none is left (re-parented orphans included), reaping them."""
    deadline = time.monotonic() + _KILL_ROUNDS_S
    while signal_tree(signal.SIGKILL) and time.monotonic() < deadline:
        reap_nowait()
        time.sleep(0.005)
    reap_nowait()


def read_env(fd: int) -> dict[bytes, bytes]:
    """The ``NAME=VALUE\\0`` records of ``fd`` (closed afterwards); ``os.environb`` for ``-1``.

    The interpreter running this launcher may have changed its own environment at startup (C locale
    coercion sets ``LC_CTYPE``), so the command's environment travels separately."""
    if fd < 0:
        return dict(os.environb)
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    env: dict[bytes, bytes] = {}
    for record in b"".join(chunks).split(b"\0"):
        name, sep, value = record.partition(b"=")
        if sep and name:
            env[name] = value
    return env


def main(args: list[str]) -> int:
    if len(args) < 4 or args[2] != "--":
        sys.stderr.write("soong-agent reaper: usage: _reaper_main.py <grace_s> <env_fd> -- argv...\n")
        return EXIT_SETUP_FAILED
    grace = float(args[0])
    command_env = read_env(int(args[1]))
    argv = args[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write(
            f"soong-agent reaper: prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}\n"
        )
        return EXIT_SETUP_FAILED
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the runner died before the death signal was armed
        return EXIT_SETUP_FAILED

    def on_stop(signum: int, frame: object) -> None:
        signal_tree(signal.SIGTERM)
        signal.setitimer(signal.ITIMER_REAL, max(grace, 0.01))

    def on_alarm(signum: int, frame: object) -> None:
        kill_tree()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_stop)
    signal.signal(signal.SIGALRM, on_alarm)
    pid = os.fork()
    if pid == 0:  # execve resets the handlers above to their defaults
        try:
            os.execve(argv[0], argv, command_env)
        except OSError as exc:
            os.write(2, f"cannot start command: {exc.strerror}: {argv[0]!r}\n".encode(errors="replace"))
        os._exit(EXIT_EXEC_FAILED)
    for fd in (0, 1):  # the pipes close as soon as the tree is gone
        try:
            os.close(fd)
        except OSError:
            pass
    status: int | None = None
    while status is None:
        try:
            done, code = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if done == pid:
            status = code
    kill_tree()
    signal.setitimer(signal.ITIMER_REAL, 0)
    if status is None:
        return EXIT_SETUP_FAILED
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
        os.kill(os.getpid(), number)
        return 128 + number
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
