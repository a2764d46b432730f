"""The ``code.search`` ``glob`` filter in pure Python, with ripgrep ``--glob`` semantics.

Used by the fallback search so that it filters exactly like ``rg --glob <pattern>`` run from the search
root (gitignore-style override globs):

* a leading ``!`` turns the glob into an exclusion (matching files are skipped, matching directories are
  not entered); otherwise only files matching the glob are searched (directories are always entered);
* a trailing ``/`` restricts the glob to directories;
* a glob containing another ``/`` is anchored at the search root (a leading ``/`` is dropped); without one
  it matches the basename at any depth;
* ``*`` and ``?`` never match ``/``; ``**`` (as ``**/``, ``/**`` or alone) matches across directories;
  ``[...]`` (``!``/``^`` negation) and ``{a,b}`` alternatives are supported; ``\\`` escapes a character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError


def _bad(pattern: str, why: str) -> AgentCoreError:
    return InvalidArgumentError(
        ErrorCode.validation_error, f"invalid glob {pattern!r}: {why}", details={"glob": pattern}
    )


def _translate(pattern: str, whole: str) -> str:
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        at_segment_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**/", i) and at_segment_start:
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                raise _bad(whole, "unclosed character class")
            body = pattern[i + 1 : j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            escaped = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[^/{escaped}]" if negate else f"[{escaped}]")
            i = j + 1
        elif c == "{":
            j = pattern.find("}", i + 1)
            if j < 0:
                raise _bad(whole, "unclosed alternative group")
            inner = pattern[i + 1 : j]
            if "{" in inner:
                raise _bad(whole, "nested alternative groups are not supported")
            out.append("(?:" + "|".join(_translate(part, whole) for part in inner.split(",")) + ")")
            i = j + 1
        elif c == "\\":
            if i + 1 >= n:
                raise _bad(whole, "dangling escape")
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class GlobFilter:
    pattern: str
    exclude: bool
    dir_only: bool
    anchored: bool
    regex: re.Pattern[str]

    @classmethod
    def compile(cls, pattern: str) -> GlobFilter:
        if not pattern or "\x00" in pattern or "\n" in pattern:
            raise _bad(pattern, "must be a non-empty single-line string")
        body = pattern
        exclude = body.startswith("!")
        if exclude:
            body = body[1:]
        dir_only = body.endswith("/") and len(body) > 1
        if dir_only:
            body = body.rstrip("/")
        anchored = "/" in body
        if body.startswith("/"):
            body = body[1:]
        if not body:
            raise _bad(pattern, "empty pattern")
        return cls(pattern, exclude, dir_only, anchored, re.compile(_translate(body, pattern), re.DOTALL))

    def _matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        subject = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return self.regex.fullmatch(subject) is not None

    def allows_file(self, rel: str) -> bool:
        """Whether a file at ``rel`` (relative to the search root, ``/``-separated) is searched."""
        matched = self._matches(rel, False)
        return not matched if self.exclude else matched

    def allows_dir(self, rel: str) -> bool:
        """Whether the directory at ``rel`` is entered."""
        return not (self.exclude and self._matches(rel, True))
