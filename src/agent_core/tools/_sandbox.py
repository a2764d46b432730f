"""The optional OS sandbox for command tools (issue 14 §8): ``[tools] sandbox = "bwrap"``.

:func:`sandboxed_argv` wraps a command's argv in Debian's bubblewrap (``bwrap``):

* the whole filesystem read-only (``--ro-bind / /``), the write roots (``<project>``,
  ``tools.allowed_write_roots``, ``/tmp`` with ``tools.allow_tmp_write``) bound writable on top;
* every existing sensitive prefix (``tools.sensitive_paths``: ``~/.ssh``, ``~/.aws``, ...) and every file
  directly in ``$HOME`` whose name matches a sensitive glob masked (empty tmpfs / ``/dev/null``);
* new PID, IPC, UTS and (when possible) cgroup namespaces with a fresh ``/proc`` and a minimal ``/dev``:
  the runtime's processes and their ``/proc`` entries are not visible; when the namespace's first process
  exits the kernel kills every other process in it (``--die-with-parent`` covers the runner's death);
* no network (``--unshare-net``, loopback only) unless ``permissions.network_policy.default = "allow"``;
* ``--new-session`` (no terminal input injection).

The sandbox never degrades silently: a missing ``bwrap`` or one that cannot create its namespaces raises
``config_error`` naming ``tools.sandbox`` before the command runs (the start check runs once per process).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from agent_core.config.schema import Settings
from agent_core.errors import ConfigError, ErrorCode
from agent_core.tools._paths import SensitiveMatcher, resolve_dir, user_home, write_roots

_STARTS: dict[str, str | None] = {}
"""bwrap path → ``None`` when it started once, else the failure message."""
_PROBE_TIMEOUT_S = 15.0


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


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


def check_bwrap(bwrap: str | None) -> str:
    """``bwrap``'s path once it was seen starting a sandbox; raises ``config_error`` otherwise."""
    if bwrap is None:
        raise _unavailable('[tools] sandbox = "bwrap" but bubblewrap (bwrap) is not on PATH')
    if bwrap not in _STARTS:
        argv = [
            bwrap,
            *_base_flags(False),
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--",
            "true",
        ]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _STARTS[bwrap] = f"bubblewrap ({bwrap}) cannot start a sandbox: {exc}"
        else:
            problem = done.stderr.decode("utf-8", "replace").strip()[-300:]
            _STARTS[bwrap] = (
                None
                if done.returncode == 0
                else f"bubblewrap ({bwrap}) cannot start a sandbox (exit {done.returncode}: {problem})"
            )
    failure = _STARTS[bwrap]
    if failure is not None:
        raise _unavailable(failure)
    return bwrap


def hidden_paths(matcher: SensitiveMatcher, home: Path) -> list[Path]:
    """Existing sensitive prefixes plus the files directly in ``home`` matching a sensitive glob."""
    found: list[Path] = []
    for prefix in matcher.prefixes:
        if os.path.lexists(prefix):
            resolved = resolve_dir(prefix)
            if resolved.exists() and resolved not in found:
                found.append(resolved)
    try:
        entries = list(os.scandir(home))
    except OSError:
        entries = []
    for entry in entries:
        if any(fnmatchcase(entry.name, g) for g in matcher.globs):
            path = resolve_dir(Path(entry.path))
            if path.exists() and path not in found:
                found.append(path)
    return found


def sandboxed_argv(
    argv: Sequence[str], *, cwd: Path, settings: Settings, project: Path, soong_home: Path
) -> list[str]:
    """``argv`` unchanged with ``tools.sandbox = "off"``, else wrapped in bwrap (see module docstring)."""
    tools = settings.tools
    if tools.sandbox == "off":
        return list(argv)
    bwrap = check_bwrap(find_bwrap())
    home = user_home()
    network = settings.permissions.network_policy.default == "allow"
    roots = write_roots(project, tools.allowed_write_roots, allow_tmp=tools.allow_tmp_write)
    matcher = SensitiveMatcher.from_entries(
        tools.sensitive_paths, soong_home=soong_home, project_dir=project, home=home
    )
    wrapped = [bwrap, *_base_flags(network), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for root in roots:
        if root.is_dir():
            wrapped += ["--bind", os.fspath(root), os.fspath(root)]
    for path in hidden_paths(matcher, home):
        if path.is_dir():
            wrapped += ["--tmpfs", os.fspath(path), "--remount-ro", os.fspath(path)]
        else:
            wrapped += ["--ro-bind", "/dev/null", os.fspath(path)]
    wrapped += ["--chdir", os.fspath(cwd), "--", *argv]
    return wrapped
