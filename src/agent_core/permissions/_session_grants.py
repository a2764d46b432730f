"""What an ``allow_for_session`` answer to a command remembers, and which later argv it covers (issue 31).

Pure policy, table-driven (:data:`COMMAND_RULES`). The rule (the README states it for users):

* The grant is either **exact** (the whole argv, covering that argv and nothing longer) or a **prefix**:
  the executable and its first argument (``git status``, ``python3 x.py``, ``find .``; the executable
  alone for a bare ``ls``). It is a prefix only for a command the table knows, whose first argument is
  not an option, not a path outside the working directory, holds no shell metacharacter and is not a
  subcommand that runs code or changes configuration (``git config``, ``npm run``, ``pip install``), and
  when the rest of the argv would itself pass the extension check below. Unknown commands, command runners (``xargs``, ``npx``) and ``tar`` always get the exact argv.
* A later argv is covered by a prefix grant only when **every added argument** passes
  :func:`extension_problem`: it is not one of the command's dangerous options (running code, writing
  files or sending data: ``find -exec/-delete``, ``git -c/--upload-pack/--output``, ``python -c``,
  ``curl -o/--data``, ``sed -i``, ...; also inside clustered short options such as ``-ic`` and in
  ``--opt=value`` form), holds no shell metacharacter or control character (``; | & $ ` < >``, newline),
  names no path outside the working directory (absolute, ``~`` or ``..``), and, for commands whose
  operands are targets (``curl``, ``wget``, ``rsync``, ``make``), is an option at all.

Anything not covered asks again; the prompt shows the prefix (``metadata.session_argv_prefix``) and
whether it is exact (``metadata.session_argv_exact``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

ANY_OPTION = "*"
"""In :attr:`CommandRule.dangerous`: every option-looking argument is dangerous (``npm``: any ``--key``
sets configuration such as ``--script-shell``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandRule:
    """How far a session grant for one command may be extended."""

    dangerous: frozenset[str] = frozenset()
    """Options that run code, write files or send data (``-exec``, ``--output``); ``--opt=value`` and,
    with :attr:`short_clusters`, ``-abc`` clusters are matched too."""
    short_clusters: bool = True
    """Single-dash options may be clustered (``-xzf``; ``-ofile``): each letter is checked on its own.
    ``False`` for commands whose single-dash options are words (``find -name``)."""
    operands: bool = True
    """Added non-option arguments are acceptable (``False``: they are targets, e.g. a URL or a make target)."""
    exact: bool = False
    """The grant is always the whole argv (command runners: ``xargs``, ``npx``)."""
    exact_subcommands: frozenset[str] = frozenset()
    """``argv[1]`` values whose grant is the whole argv (``git config``, ``npm run``, ``pip install``)."""


def _opts(*names: str) -> frozenset[str]:
    return frozenset(names)


_SHELL = CommandRule(
    dangerous=_opts("-c", "-s", "-i", "-l", "--login", "--rcfile", "--init-file", "-o", "-O", "+o", "+O")
)
_PYTHON = CommandRule(dangerous=_opts("-c", "-m", "-i", "-X", "-W"))
_NODE = CommandRule(
    dangerous=_opts(
        "-e",
        "--eval",
        "-p",
        "--print",
        "-r",
        "--require",
        "--import",
        "--loader",
        "--experimental-loader",
        "-i",
        "--interactive",
        "--inspect",
        "--inspect-brk",
        "--inspect-port",
        "--env-file",
    )
)
_PERL = CommandRule(dangerous=_opts("-e", "-E", "-M", "-m", "-I", "-i", "-x", "-d", "-n", "-p"))
_RUBY = CommandRule(
    dangerous=_opts("-e", "-r", "--require", "-I", "-i", "-x", "-n", "-p", "-s", "-C", "--jit")
)
_AWK = CommandRule(
    dangerous=_opts("-f", "--file", "-e", "--source", "-i", "--include", "-l", "--load", "-E", "--exec")
)
_GREP = CommandRule()
_READ_ONLY = CommandRule()

COMMAND_RULES: dict[str, CommandRule] = {
    "find": CommandRule(
        dangerous=_opts(
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"
        ),
        short_clusters=False,
    ),
    "git": CommandRule(
        dangerous=_opts(
            "-c",
            "--config-env",
            "--exec-path",
            "-C",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--super-prefix",
            "--upload-pack",
            "-u",
            "--receive-pack",
            "--exec",
            "-x",
            "--extcmd",
            "--tool",
            "--output",
            "-o",
            "--output-directory",
            "--ext-diff",
            "--textconv",
            "--open-files-in-pager",
            "-O",
            "--template",
            "--separate-git-dir",
            "--remote",
            "--config",
        ),
        exact_subcommands=_opts(
            "config",
            "bisect",
            "submodule",
            "filter-branch",
            "difftool",
            "mergetool",
            "daemon",
            "hook",
            "credential",
            "instaweb",
            "send-email",
            "clone",
            "archive",
            "remote",
            "upload-pack",
            "receive-pack",
            "shell",
            "alias",
            "worktree",
        ),
    ),
    **dict.fromkeys(("python", "python3", "pypy", "pypy3"), _PYTHON),
    **dict.fromkeys(("node", "nodejs", "deno", "bun"), _NODE),
    "perl": _PERL,
    "ruby": _RUBY,
    **dict.fromkeys(("sh", "bash", "dash", "zsh", "ksh"), _SHELL),
    "sed": CommandRule(dangerous=_opts("-i", "--in-place", "-e", "--expression", "-f", "--file")),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _AWK),
    "xargs": CommandRule(exact=True),
    "curl": CommandRule(
        dangerous=_opts(
            "-o",
            "--output",
            "-O",
            "--remote-name",
            "--remote-name-all",
            "--output-dir",
            "--create-dirs",
            "-K",
            "--config",
            "-T",
            "--upload-file",
            "-d",
            "--data",
            "--data-binary",
            "--data-raw",
            "--data-ascii",
            "--data-urlencode",
            "--json",
            "-F",
            "--form",
            "--form-string",
            "-D",
            "--dump-header",
            "-c",
            "--cookie-jar",
            "-b",
            "--cookie",
            "--trace",
            "--trace-ascii",
            "--libcurl",
            "--stderr",
            "-x",
            "--proxy",
            "--unix-socket",
            "--abstract-unix-socket",
            "-w",
            "--write-out",
        ),
        operands=False,
    ),
    "wget": CommandRule(
        dangerous=_opts(
            "-O",
            "--output-document",
            "-o",
            "--output-file",
            "-a",
            "--append-output",
            "-P",
            "--directory-prefix",
            "-i",
            "--input-file",
            "-e",
            "--execute",
            "--post-file",
            "--post-data",
            "--body-file",
            "--body-data",
            "--use-askpass",
            "-x",
            "--force-directories",
            "--save-cookies",
            "--load-cookies",
            "-r",
            "--recursive",
            "-m",
            "--mirror",
        ),
        operands=False,
    ),
    # tar's first argument is its operation (``xf``, ``-czf``): any added archive or file extracts or writes
    "tar": CommandRule(exact=True),
    "rsync": CommandRule(
        dangerous=_opts(
            "-e",
            "--rsh",
            "--rsync-path",
            "--delete",
            "--delete-before",
            "--delete-during",
            "--delete-delay",
            "--delete-after",
            "--delete-excluded",
            "--delete-missing-args",
            "--remove-source-files",
            "--write-batch",
            "--only-write-batch",
            "--read-batch",
            "--log-file",
            "-T",
            "--temp-dir",
            "--backup-dir",
            "--partial-dir",
            "--copy-dest",
            "--link-dest",
            "--compare-dest",
            "--files-from",
            "--chown",
            "--chmod",
            "--daemon",
            "--config",
            "--password-file",
            "-M",
            "--remote-option",
        ),
        operands=False,
    ),
    "npm": CommandRule(
        dangerous=_opts(ANY_OPTION),
        exact_subcommands=_opts(
            "run",
            "run-script",
            "rum",
            "urn",
            "exec",
            "x",
            "install",
            "i",
            "in",
            "add",
            "ci",
            "clean-install",
            "install-test",
            "it",
            "install-ci-test",
            "cit",
            "uninstall",
            "remove",
            "rm",
            "un",
            "unlink",
            "update",
            "up",
            "upgrade",
            "publish",
            "unpublish",
            "config",
            "c",
            "set",
            "init",
            "create",
            "rebuild",
            "rb",
            "link",
            "ln",
            "explore",
            "edit",
            "pkg",
            "set-script",
            "login",
            "adduser",
            "logout",
            "token",
            "owner",
            "access",
            "deprecate",
            "dist-tag",
            "hook",
            "team",
            "org",
            "star",
            "cache",
            "prune",
            "dedupe",
            "audit",
            "version",
            "pack",
        ),
    ),
    "npx": CommandRule(exact=True),
    **dict.fromkeys(
        ("pip", "pip3"),
        CommandRule(
            dangerous=_opts(
                "-r",
                "--requirement",
                "-e",
                "--editable",
                "-t",
                "--target",
                "--prefix",
                "--root",
                "--src",
                "-c",
                "--constraint",
                "-i",
                "--index-url",
                "--extra-index-url",
                "-f",
                "--find-links",
                "--trusted-host",
                "--log",
                "--cache-dir",
                "--config-settings",
                "-C",
                "--global-option",
                "--build-option",
                "--install-option",
                "--proxy",
                "--cert",
                "--client-cert",
                "--python",
            ),
            exact_subcommands=_opts("install", "download", "wheel", "uninstall", "config", "cache", "index"),
        ),
    ),
    **dict.fromkeys(
        ("make", "gmake"),
        CommandRule(
            dangerous=_opts(
                "-f",
                "--file",
                "--makefile",
                "-C",
                "--directory",
                "-I",
                "--include-dir",
                "--eval",
                "-e",
                "--environment-overrides",
                "-E",
                "-W",
                "--what-if",
                "--new-file",
                "--assume-new",
            ),
            operands=False,
        ),
    ),
    # common read-only tools: extensions only need the general checks (paths, metacharacters)
    **dict.fromkeys(
        ("ls", "cat", "head", "tail", "wc", "echo", "pwd", "stat", "du", "diff", "tree", "cut", "uniq"),
        _READ_ONLY,
    ),
    **dict.fromkeys(("grep", "egrep", "fgrep"), _GREP),
    "rg": CommandRule(dangerous=_opts("--pre", "--pre-glob")),
    "sort": CommandRule(
        dangerous=_opts("-o", "--output", "--compress-program", "-T", "--temporary-directory")
    ),
    "pytest": CommandRule(
        dangerous=_opts(
            "-p",
            "-c",
            "--config-file",
            "-o",
            "--override-ini",
            "--rootdir",
            "--basetemp",
            "--junitxml",
            "--junit-xml",
            "--result-log",
            "--resultlog",
            "--confcutdir",
            "--pyargs",
            "--debug",
            "--pastebin",
        )
    ),
}
"""Commands whose session grant may be a prefix, keyed by :func:`command_name`."""

_METACHARACTERS = re.compile(r"[;|&$`<>\x00-\x1f\x7f]")
_VERSIONED = re.compile(r"^(python|pypy|pip|ruby|perl|node)[0-9][0-9.]*$")


def command_name(argv0: str) -> str:
    """The table key of an executable: its basename, with a version suffix dropped (``python3.12`` ->
    ``python``, ``pip3.11`` -> ``pip``)."""
    base = os.path.basename(argv0)
    versioned = _VERSIONED.match(base)
    if versioned is not None and base not in COMMAND_RULES:
        return versioned.group(1)
    return base


def rule_for(argv: Sequence[str]) -> CommandRule | None:
    """The table entry for ``argv[0]``; ``None`` for a command the table does not know."""
    return COMMAND_RULES.get(command_name(argv[0])) if argv else None


@dataclass(frozen=True, slots=True)
class SessionGrant:
    """One remembered ``allow_for_session`` answer to a command: ``prefix`` and whether it is ``exact``
    (covers that argv only) or may be extended by arguments :func:`extension_problem` accepts."""

    prefix: tuple[str, ...]
    exact: bool

    def covers(self, argv: Sequence[str]) -> bool:
        if self.exact:
            return tuple(argv) == self.prefix
        if len(argv) < len(self.prefix) or tuple(argv[: len(self.prefix)]) != self.prefix:
            return False
        return extension_problem(self.prefix, argv[len(self.prefix) :]) is None

    def describe(self) -> str:
        """What the grant covers, one line for prompts (the argv itself is shown beside it)."""
        if self.exact:
            return "exactly this command, nothing added"
        return (
            "commands starting with it that add no option running code, writing files or sending data, "
            "no shell metacharacter and no path outside the working directory"
        )


def session_grant(argv: Sequence[str]) -> SessionGrant:
    """What ``allow_for_session`` remembers for ``argv`` (see the module docstring)."""
    whole = SessionGrant(tuple(argv), exact=True)
    rule = rule_for(argv)
    if rule is None or rule.exact:
        return whole
    if len(argv) < 2:  # a bare command: its first argument may be a subcommand, so only with no table of them
        return whole if rule.exact_subcommands else SessionGrant(tuple(argv), exact=False)
    first = argv[1]
    if first.startswith(("-", "+")) or first in rule.exact_subcommands:
        return whole
    if _METACHARACTERS.search(first) or _path_outside(first):
        return whole
    if extension_problem(argv[:2], argv[2:]) is not None:  # this argv itself adds a dangerous argument
        return whole
    return SessionGrant(tuple(argv[:2]), exact=False)


def session_prefix(argv: Sequence[str]) -> list[str]:
    """The argv prefix :func:`session_grant` remembers (``metadata.session_argv_prefix``)."""
    return list(session_grant(argv).prefix)


def _option_names(arg: str, rule: CommandRule) -> list[str]:
    """The option names one argument spells: ``--opt`` / ``--opt=value`` -> ``--opt``; ``-xzf`` ->
    ``-xzf``, ``-x``, ``-z``, ``-f`` (with short clusters); ``-exec`` stays a word without them."""
    if arg.startswith("--"):
        return [arg.split("=", 1)[0]]
    if arg.startswith(("-", "+")) and len(arg) > 1:
        names = [arg, arg.split("=", 1)[0]]
        if rule.short_clusters:
            names += [arg[0] + letter for letter in arg[1:]]
        return names
    return []


def _path_outside(arg: str) -> bool:
    """The argument (or its ``=value`` part) names a path outside the working directory."""
    values = [arg]
    if "=" in arg:
        values.append(arg.split("=", 1)[1])
    for value in values:
        if value.startswith(("/", "~")):
            return True
        if ".." in value.replace("\\", "/").split("/"):
            return True
    return False


def extension_problem(prefix: Sequence[str], extension: Sequence[str]) -> str | None:
    """Why ``extension`` (the arguments added after a granted, non-exact ``prefix``) is not covered by the
    grant; ``None`` when it is."""
    if not extension:
        return None
    rule = rule_for(prefix)
    name = command_name(prefix[0]) if prefix else ""
    if rule is None or rule.exact or (len(prefix) >= 2 and prefix[1] in rule.exact_subcommands):
        return "the session grant covers exactly the command shown"
    if len(prefix) < 2 and rule.exact_subcommands:
        return f"a {name} subcommand the grant did not show"
    for arg in extension:
        if _METACHARACTERS.search(arg):
            return f"added argument {arg!r} holds a shell metacharacter or control character"
        if _path_outside(arg):
            return f"added argument {arg!r} names a path outside the working directory"
        names = _option_names(arg, rule)
        if names:
            if ANY_OPTION in rule.dangerous:
                return f"added option {arg!r}: every option of {name} needs a new answer"
            hit = next((n for n in names if n in rule.dangerous), None)
            if hit is not None:
                return f"added option {arg!r} ({hit}) can run code, write files or send data"
        elif not rule.operands:
            return f"added argument {arg!r} is a new target for {name}"
    return None
