"""The command runner shared by ``code.run_command``, declarative tools and hooks (tools.md §13.7).

Contract:

* :func:`run_process` spawns ``argv`` with :func:`asyncio.create_subprocess_exec` (or a shell string with
  :func:`asyncio.create_subprocess_shell`, for user-level declarative tools and hooks only) in a **new
  session / process group**, with exactly the given environment (build it with :func:`build_env`; the
  launcher below receives it in a memory file and execs the command with it, so nothing its own
  interpreter adds, such as ``LC_CTYPE`` from locale coercion, reaches the command) and stdin from
  ``stdin_data`` (then closed) or ``/dev/null``. A bare ``argv[0]`` is looked up only in the absolute
  ``PATH`` entries (:mod:`agent_core.tools._executables`); callers pass the resolved path anyway.
* stdout and stderr are captured separately: the first :data:`CAPTURE_CAP_BYTES` bytes of each stream plus
  a rolling tail (so head+tail truncation is exact however long the stream is). ``on_stdout_line`` makes
  stdout streamed line by line to a consumer instead of being captured.
* Timeout: SIGTERM to the whole group, SIGKILL after :data:`KILL_GRACE_S` seconds, ``timed_out=True``.
  ``cancel_event`` being set does the same and returns the partial output with ``cancelled=True``; a task
  cancellation terminates the group the same way and re-raises :class:`asyncio.CancelledError`.
* When the leader exits normally, any process it left in its group is killed too: nothing keeps running
  after the runner returns. On Linux (``tree=True``, the default) the command runs under the subreaper
  launcher :mod:`agent_core.tools._reaper_main`, which also kills descendants that left the group or
  session (``setsid`` + closed stdio) — at exit, timeout and cancellation alike (issue 14 §5).
* :func:`head_tail` renders a stream over its limit as first half + ``... [truncated N bytes] ...`` +
  last half, cut on UTF-8 character boundaries and decoded with replacement.

The runner never redacts: callers redact inline text and artifacts (they know the secret set).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.tools._executables import resolve_executable as resolve_executable
from agent_core.tools._executables import trusted_which

KILL_GRACE_S = 2.0
CAPTURE_CAP_BYTES = 64 * 1024 * 1024
"""Maximum bytes of one stream kept for its artifact; beyond it the artifact is flagged truncated."""
DEFAULT_TAIL_KEEP = 1024 * 1024
_READ_CHUNK = 65536
_DRAIN_AFTER_EXIT_S = 2.0
REAPER_SCRIPT = Path(__file__).with_name("_reaper_main.py")
TREE_TRACKING = sys.platform.startswith("linux")
"""Whether commands run under the subreaper launcher (needs ``prctl``, i.e. Linux)."""
_LAUNCHER_MARGIN_S = 1.0
"""Extra time the launcher gets, after the grace, to SIGKILL and reap the tree before its group is killed."""


@dataclass(frozen=True)
class StreamCapture:
    """One captured output stream."""

    head: bytes
    """The first ``CAPTURE_CAP_BYTES`` bytes (the whole stream when it was not longer)."""
    tail: bytes
    """The last bytes of the stream (meaningful when ``total_bytes > len(head)``)."""
    total_bytes: int

    @property
    def overflowed(self) -> bool:
        """More bytes were produced than kept in :attr:`head`."""
        return self.total_bytes > len(self.head)

    def text(self) -> str:
        return self.head.decode("utf-8", errors="replace")


EMPTY_CAPTURE = StreamCapture(head=b"", tail=b"", total_bytes=0)


@dataclass(frozen=True)
class CommandOutcome:
    """What happened to one process."""

    exit_code: int | None
    """Exit status (negative = killed by that signal); ``None`` when timed out or cancelled."""
    stdout: StreamCapture
    stderr: StreamCapture
    timed_out: bool
    cancelled: bool
    duration_ms: int

    @property
    def partial(self) -> bool:
        """Timed out or cancelled after producing some output."""
        return (self.timed_out or self.cancelled) and (self.stdout.total_bytes + self.stderr.total_bytes) > 0


class _Capture:
    def __init__(self, cap: int, tail_keep: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._cap = cap
        self._tail_keep = tail_keep

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        self.tail += chunk
        if len(self.tail) > self._tail_keep:
            del self.tail[: len(self.tail) - self._tail_keep]

    def freeze(self) -> StreamCapture:
        return StreamCapture(head=bytes(self.head), tail=bytes(self.tail), total_bytes=self.total)


def build_env(
    allowlist: Iterable[str],
    *,
    required: Iterable[str] = (),
    required_by: str = "",
    extra: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for a child: ``allowlist`` names present in ``environ`` (missing ones omitted), every
    ``required`` name (missing → ``config_error`` naming the variable and ``required_by``), then ``extra``
    (explicit values such as ``SOONG_AGENT_HOME`` for hooks). Nothing else is ever passed."""
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for name in allowlist:
        if name in source:
            env[name] = source[name]
    for name in required:
        if name not in source:
            raise ConfigError(
                ErrorCode.config_error,
                f"environment variable {name!r} required by {required_by or 'a tool'} is not set",
                details={"variable": name, "required_by": required_by},
            )
        env[name] = source[name]
    if extra:
        env.update(extra)
    return env


def env_summary(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{name: "<set>" | "<unset>"}`` for the permission request; values are never included."""
    source = os.environ if environ is None else environ
    return {name: ("<set>" if name in source else "<unset>") for name in names}


def _utf8_start(data: bytes, index: int) -> int:
    """Smallest index ≥ ``index`` that starts a UTF-8 character."""
    while index < len(data) and (data[index] & 0xC0) == 0x80:
        index += 1
    return index


def utf8_prefix(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` of at most ``limit`` bytes that ends on a character boundary."""
    if len(data) <= limit:
        return data
    cut = limit
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def head_tail(capture: StreamCapture, limit: int) -> tuple[str, bool]:
    """Inline text of a stream under ``limit`` bytes: the whole stream, or first half + marker + last
    half (``... [truncated N bytes] ...``, N = bytes left out). Returns ``(text, truncated)``."""
    if capture.total_bytes <= limit:
        return capture.text(), False
    head = utf8_prefix(capture.head, limit // 2)
    keep_tail = limit - limit // 2
    source = capture.head if not capture.overflowed else capture.tail
    tail_raw = source[-keep_tail:] if keep_tail else b""
    tail = tail_raw[_utf8_start(tail_raw, 0) :]
    omitted = capture.total_bytes - len(head) - len(tail)
    text = (
        head.decode("utf-8", errors="replace")
        + f"... [truncated {omitted} bytes] ..."
        + tail.decode("utf-8", errors="replace")
    )
    return text, True


async def _pump(
    stream: asyncio.StreamReader | None, capture: _Capture, on_line: Callable[[bytes], None] | None
) -> None:
    if stream is None:
        return
    if on_line is None:
        while chunk := await stream.read(_READ_CHUNK):
            capture.feed(chunk)
        return
    pending = bytearray()
    while chunk := await stream.read(_READ_CHUNK):
        capture.total += len(chunk)
        pending += chunk
        while (nl := pending.find(b"\n")) >= 0:
            line = bytes(pending[: nl + 1])
            del pending[: nl + 1]
            on_line(line)
    if pending:
        on_line(bytes(pending))


async def _feed_stdin(writer: asyncio.StreamWriter | None, data: bytes) -> None:
    if writer is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        writer.write(data)
        await writer.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        writer.close()
        await writer.wait_closed()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _leader_exit(proc: asyncio.subprocess.Process) -> int:
    """Waits for the leader's exit status only. ``Process.wait()`` also waits for the pipes to close, which a
    background group member may keep open; the status is known as soon as the child watcher reaps it."""
    delay = 0.002
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return proc.returncode


async def _terminate(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM to the group, SIGKILL after ``grace_s`` if the leader is still alive."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(_leader_exit(proc), timeout=grace_s)
    except TimeoutError:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    await _leader_exit(proc)


async def _finish_readers(proc: asyncio.subprocess.Process, readers: Sequence[asyncio.Task[None]]) -> None:
    _, pending = await asyncio.wait(readers, timeout=_DRAIN_AFTER_EXIT_S)
    for task in pending:  # a process that escaped the group (setsid) still holds the pipe
        task.cancel()
    for task in readers:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if pending:
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()


def _bare_lookup(name: str, env: Mapping[str, str]) -> str:
    """``name`` itself when it holds a ``/``, else its first match in the absolute entries of
    ``env["PATH"]`` (a relative entry is never searched); missing → :class:`FileNotFoundError`."""
    found = name if "/" in name else trusted_which(name, path_value=env.get("PATH", os.defpath))
    if found is None or not os.path.exists(found):
        raise FileNotFoundError(2, "No such file or directory", name)
    return found


def exact_env_fd(env: Mapping[str, str]) -> int:
    """A memory file holding ``env`` as ``NAME=VALUE\\0`` records, for the launcher to exec the command
    with exactly that environment (the launcher's own interpreter adds ``LC_CTYPE`` when it coerces the
    C locale, so its ``os.environ`` is not what the caller passed)."""
    fd = os.memfd_create("soong-agent-env", os.MFD_CLOEXEC)
    try:
        data = b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in env.items())
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _launcher_argv(
    argv: Sequence[str] | None, shell_command: str | None, env: Mapping[str, str], grace_s: float, env_fd: int
) -> list[str]:
    """``argv`` (or ``/bin/sh -c shell_command``) behind the subreaper launcher, which reads the command's
    environment from ``env_fd``; ``argv[0]`` is looked up here so a missing executable is still a
    :class:`FileNotFoundError` at spawn."""
    if argv is None:
        assert shell_command is not None
        command = ["/bin/sh", "-c", shell_command]
    else:
        command = list(argv)
        command[0] = _bare_lookup(command[0], env)
    return [sys.executable, "-I", "-S", os.fspath(REAPER_SCRIPT), f"{grace_s:g}", str(env_fd), "--", *command]


async def _spawn(
    argv: Sequence[str] | None,
    shell_command: str | None,
    *,
    cwd: Path,
    env: Mapping[str, str],
    with_stdin: bool,
    tree: bool = False,
    grace_s: float = KILL_GRACE_S,
    pass_fds: Sequence[int] = (),
) -> asyncio.subprocess.Process:
    stdin = asyncio.subprocess.PIPE if with_stdin else asyncio.subprocess.DEVNULL
    pipe = asyncio.subprocess.PIPE
    if tree:
        if not os.path.isdir(cwd):
            raise FileNotFoundError(2, "No such file or directory", os.fspath(cwd))
        env_fd = exact_env_fd(env)
        try:
            return await asyncio.create_subprocess_exec(
                *_launcher_argv(argv, shell_command, env, grace_s, env_fd),
                cwd=os.fspath(cwd),
                env=dict(env),
                stdin=stdin,
                stdout=pipe,
                stderr=pipe,
                start_new_session=True,
                pass_fds=(*pass_fds, env_fd),
            )
        finally:
            os.close(env_fd)
    if argv is not None:
        return await asyncio.create_subprocess_exec(
            _bare_lookup(argv[0], env),
            *argv[1:],
            cwd=os.fspath(cwd),
            env=dict(env),
            stdin=stdin,
            stdout=pipe,
            stderr=pipe,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    assert shell_command is not None
    return await asyncio.create_subprocess_shell(
        shell_command,
        cwd=os.fspath(cwd),
        env=dict(env),
        stdin=stdin,
        stdout=pipe,
        stderr=pipe,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


async def run_process(
    argv: Sequence[str] | None = None,
    *,
    shell_command: str | None = None,
    cwd: Path,
    env: Mapping[str, str],
    stdin_data: bytes | None = None,
    timeout_ms: int | None = None,
    cancel_event: asyncio.Event | None = None,
    on_stdout_line: Callable[[bytes], None] | None = None,
    capture_cap: int = CAPTURE_CAP_BYTES,
    tail_keep: int = DEFAULT_TAIL_KEEP,
    kill_grace_s: float = KILL_GRACE_S,
    tree: bool = True,
    pass_fds: Sequence[int] = (),
) -> CommandOutcome:
    """Runs one process to completion, timeout or cancellation (see the module docstring).

    ``tree`` runs it under the subreaper launcher where supported (:data:`TREE_TRACKING`), so no
    descendant survives the call; ``False`` only kills the process group (for trusted helpers like ``rg``).
    ``pass_fds`` stay open in the child (the sandbox's seccomp program).

    Exactly one of ``argv`` (exec; ``argv[0]`` should already be resolved) and ``shell_command`` must be
    given. Spawn failures raise ``file_not_found`` (missing executable/cwd) or ``internal_error``.
    """
    if (argv is None) == (shell_command is None):
        raise AgentCoreError(ErrorCode.validation_error, "exactly one of argv and shell_command is required")
    if argv is not None and (not argv or any("\x00" in a for a in argv)):
        raise AgentCoreError(ErrorCode.validation_error, "argv must be non-empty and free of NUL bytes")
    started = time.monotonic()
    if cancel_event is not None and cancel_event.is_set():
        return CommandOutcome(None, EMPTY_CAPTURE, EMPTY_CAPTURE, False, True, 0)
    try:
        launcher = tree and TREE_TRACKING
        proc = await _spawn(
            argv,
            shell_command,
            cwd=cwd,
            env=env,
            with_stdin=stdin_data is not None,
            tree=launcher,
            grace_s=kill_grace_s,
            pass_fds=pass_fds,
        )
    except FileNotFoundError as exc:
        raise AgentCoreError(
            ErrorCode.file_not_found,
            f"cannot start command: {exc.strerror}: {exc.filename!r}",
            details={"executable": argv[0] if argv else None},
            cause=exc,
        ) from exc
    except OSError as exc:
        raise AgentCoreError(
            ErrorCode.internal_error, f"cannot start command: {exc.strerror or exc}", cause=exc
        ) from exc

    out = _Capture(capture_cap, max(tail_keep, 1))
    err = _Capture(capture_cap, max(tail_keep, 1))
    readers = [
        asyncio.create_task(_pump(proc.stdout, out, on_stdout_line)),
        asyncio.create_task(_pump(proc.stderr, err, None)),
    ]
    feeder = asyncio.create_task(_feed_stdin(proc.stdin, stdin_data or b""))
    waiter = asyncio.create_task(_leader_exit(proc))
    watchers: set[asyncio.Future[Any]] = {waiter}
    cancel_watch: asyncio.Task[bool] | None = None
    if cancel_event is not None:
        cancel_watch = asyncio.create_task(cancel_event.wait())
        watchers.add(cancel_watch)
    timed_out = cancelled = False
    try:
        timeout_s = None if timeout_ms is None else timeout_ms / 1000
        done, _ = await asyncio.wait(watchers, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        outer_grace = kill_grace_s + _LAUNCHER_MARGIN_S if launcher else kill_grace_s
        if waiter in done:
            _signal_group(proc.pid, signal.SIGKILL)  # leftovers of the group must not outlive the call
        else:
            cancelled = bool(cancel_watch is not None and cancel_watch in done)
            timed_out = not cancelled
            await _terminate(proc, outer_grace)
        await _finish_readers(proc, readers)
    except asyncio.CancelledError:
        try:
            await _terminate(proc, kill_grace_s + _LAUNCHER_MARGIN_S if launcher else kill_grace_s)
        finally:
            _signal_group(proc.pid, signal.SIGKILL)
            for task in readers:
                task.cancel()
        raise
    finally:
        feeder.cancel()
        if cancel_watch is not None:
            cancel_watch.cancel()
        if not waiter.done():
            waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feeder
    exit_code = None if (timed_out or cancelled) else proc.returncode
    return CommandOutcome(
        exit_code=exit_code,
        stdout=out.freeze(),
        stderr=err.freeze(),
        timed_out=timed_out,
        cancelled=cancelled,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
