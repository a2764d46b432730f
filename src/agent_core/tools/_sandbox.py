"""The optional OS sandbox for command tools (issue 14 item 8, issue 31 items 3, 5, 6):
``[tools] sandbox = "bwrap"``.

:func:`sandboxed_command` wraps a command's argv in Debian's bubblewrap (``bwrap``):

* the whole filesystem read-only (``--ro-bind / /``), the write roots (``<project>``,
  ``tools.allowed_write_roots``, ``/tmp`` with ``tools.allow_tmp_write``) bound writable on top;
* inside them, every existing ``.git`` and ``.soong-agent`` (and ``${SOONG_AGENT_HOME}`` when it lies in a
  root) re-bound read-only: no planted hooks, git config or ``gitdir:``, no edits of the runtime's state;
* every sensitive path masked (empty read-only file / tmpfs): the existing sensitive prefixes
  (``tools.sensitive_paths`` plus the built-in credential class: ``~/.ssh``, ``~/.netrc``, ...), files
  directly in ``$HOME`` and files anywhere in the write roots whose name matches a sensitive glob
  (``.env``, ``*.pem``, ``id_rsa*``, ...) (:mod:`agent_core.tools._sandbox_view`);
* new PID, IPC, UTS and (when possible) cgroup namespaces with a fresh ``/proc`` and a minimal ``/dev``:
  the runtime's processes and their ``/proc`` entries are not visible; when the namespace's first process
  exits the kernel kills every other process in it (``--die-with-parent`` covers the runner's death);
* no network unless ``permissions.network_policy.default = "allow"``: a new network namespace (loopback
  only, no abstract unix sockets of the host) and a seccomp program refusing new ``AF_UNIX`` sockets
  (:mod:`agent_core.tools._seccomp`), so host socket files (``docker.sock``, an ssh-agent, a database)
  cannot be connected to through the read-only view;
* ``--new-session`` (no terminal input injection).

The sandbox never degrades silently: a missing ``bwrap`` (one inside the project does not count), one that
cannot create its namespaces or load the seccomp program, or a machine without a seccomp program raises
``config_error`` naming ``tools.sandbox`` before the command runs (the start check runs once per process).
The returned :class:`SandboxedCommand` holds the seccomp program's file descriptor: pass
``pass_fds`` to the runner and close it afterwards (it is a context manager).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from agent_core.config.schema import Settings
from agent_core.errors import ConfigError, ErrorCode
from agent_core.permissions._protected import credential_entries
from agent_core.tools._executables import trusted_which
from agent_core.tools._paths import SensitiveMatcher, user_home, write_roots
from agent_core.tools._sandbox_view import sandbox_view
from agent_core.tools._seccomp import unix_socket_filter

_STARTS: dict[str, str | None] = {}
"""bwrap path → ``None`` when it started once, else the failure message."""
_PROBE_TIMEOUT_S = 15.0


def find_bwrap(exclude: Sequence[Path] = ()) -> str | None:
    """``bwrap`` in an absolute ``PATH`` entry outside ``exclude`` (never through a relative one)."""
    return trusted_which("bwrap", exclude=exclude)


def _unavailable(message: str) -> ConfigError:
    return ConfigError(
        ErrorCode.config_error,
        f"{message}; the command was not run. Install bubblewrap (apt-get install bubblewrap) or set "
        '[tools] sandbox = "off"',
        details={"config_key": "tools.sandbox"},
    )


def _base_flags(network: bool) -> list[str]:
    flags = [
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not network:
        flags.append("--unshare-net")
    return flags


def _program_fd(program: bytes) -> int:
    """A memory file holding the seccomp ``program``, positioned at its start (bwrap reads it to EOF)."""
    fd = os.memfd_create("soong-agent-seccomp", os.MFD_CLOEXEC)
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_bwrap(bwrap: str | None) -> str:
    """``bwrap``'s path once it was seen starting a sandbox (with the seccomp program, where this machine
    has one); raises ``config_error`` otherwise."""
    if bwrap is None:
        raise _unavailable('[tools] sandbox = "bwrap" but bubblewrap (bwrap) is not on PATH')
    if bwrap not in _STARTS:
        program = unix_socket_filter()
        fd = _program_fd(program) if program is not None else None
        argv = [bwrap, *_base_flags(False), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        if fd is not None:
            argv += ["--seccomp", str(fd)]
        argv += ["--", "true"]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
                pass_fds=(fd,) if fd is not None else (),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _STARTS[bwrap] = f"bubblewrap ({bwrap}) cannot start a sandbox: {exc}"
        else:
            problem = done.stderr.decode("utf-8", "replace").strip()[-300:]
            _STARTS[bwrap] = (
                None
                if done.returncode == 0
                else f"bubblewrap ({bwrap}) cannot start a sandbox (exit {done.returncode}: {problem})"
            )
        finally:
            if fd is not None:
                os.close(fd)
    failure = _STARTS[bwrap]
    if failure is not None:
        raise _unavailable(failure)
    return bwrap


@dataclass(slots=True)
class SandboxedCommand:
    """The argv to run and the descriptors it needs open (the seccomp program); close it after the run."""

    argv: list[str]
    pass_fds: tuple[int, ...] = field(default=())

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()

    def __enter__(self) -> SandboxedCommand:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _without_pwd(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    """``argv`` behind ``env -u PWD`` when the command's environment has no ``PWD``: bwrap always sets it
    after changing directory. (Not for an ``argv[0]`` holding ``=``, which ``env`` would take for an
    assignment; such a command sees ``PWD``, its own working directory.)"""
    if env is None or "PWD" in env or "=" in argv[0]:
        return list(argv)
    tool = trusted_which("env", path_value=os.defpath)
    return [tool, "-u", "PWD", *argv] if tool is not None else list(argv)


def sandboxed_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    settings: Settings,
    project: Path,
    soong_home: Path,
    env: Mapping[str, str] | None = None,
) -> SandboxedCommand:
    """``argv`` unchanged with ``tools.sandbox = "off"``, else wrapped in bwrap (see module docstring).
    ``env`` is the command's environment: inside bwrap it sees exactly that."""
    tools = settings.tools
    if tools.sandbox == "off":
        return SandboxedCommand(list(argv))
    bwrap = check_bwrap(find_bwrap(exclude=(project,)))  # never a bwrap the project ships
    home = user_home()
    network = settings.permissions.network_policy.default == "allow"
    program: bytes | None = None
    if not network:
        program = unix_socket_filter()
        if program is None:
            raise _unavailable(
                "the sandbox has no AF_UNIX socket filter for this machine's architecture "
                '(allow the network with permissions.network_policy.default = "allow" to run without it)'
            )
    roots = write_roots(project, tools.allowed_write_roots, allow_tmp=tools.allow_tmp_write)
    matcher = SensitiveMatcher.from_entries(
        [*tools.sensitive_paths, *credential_entries()], soong_home=soong_home, project_dir=project, home=home
    )
    view = sandbox_view(roots, matcher, home, soong_home=soong_home)
    wrapped = [bwrap, *_base_flags(network), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for root in roots:
        if root.is_dir():
            wrapped += ["--bind", os.fspath(root), os.fspath(root)]
    for path in view.read_only:
        wrapped += ["--ro-bind", os.fspath(path), os.fspath(path)]
    for path in view.masked:
        if path.is_dir():
            wrapped += ["--tmpfs", os.fspath(path), "--remount-ro", os.fspath(path)]
        else:
            wrapped += ["--ro-bind", "/dev/null", os.fspath(path)]
    fds: tuple[int, ...] = ()
    if program is not None:
        fd = _program_fd(program)
        fds = (fd,)
        wrapped += ["--seccomp", str(fd)]
    wrapped += ["--chdir", os.fspath(cwd), "--", *_without_pwd(argv, env)]
    return SandboxedCommand(wrapped, fds)
