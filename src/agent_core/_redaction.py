"""Secret redaction: write-time (irreversible) and read-time (for replay/inspect).

Write-time redaction replaces the *values* of secret environment variables: every variable named by
an ``api_key_env`` setting, plus variables whose name matches :data:`SECRET_ENV_NAME` and whose value
has at least 8 characters (docs/storage.md#redaction). Read-time redaction additionally masks the values of
mapping keys that look sensitive (:data:`SENSITIVE_KEY`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED = "[REDACTED]"
SECRET_ENV_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)")
SENSITIVE_KEY = re.compile(r"(?i)(api[_-]?key|authorization|token|secret|password|cookie|credential)")
TOKEN_COUNT_KEY = re.compile(r"(?i)tokens|token_(count|budget)")
"""Keys of token counters; exempt from read-time redaction when their value is numeric."""
_MIN_PATTERN_SECRET = 8
_MIN_NAMED_SECRET = 4
NAMES_REFRESH_S = 1.0
"""How long a :class:`Redactor` trusts its list of secret-looking variable names while the number of
variables stays the same (an added or removed variable is seen at once; a swap within this time, later)."""


_PROCESS_SECRETS: set[str] = set()
_PROCESS_VERSION = [0]


def register_secret(value: str) -> None:
    """Registers a secret the *process* holds (the ``soong-agent serve`` token, ...): every
    :class:`Redactor` of the process replaces it from then on, in tool output, model requests, storage,
    events and logs. Shorter than 4 characters is ignored."""
    if len(value) >= _MIN_NAMED_SECRET and value not in _PROCESS_SECRETS:
        _PROCESS_SECRETS.add(value)
        _PROCESS_VERSION[0] += 1


def dsn_secrets(dsn: str) -> list[str]:
    """The password inside a database DSN (URL form ``scheme://user:pw@host/db`` or key/value form
    ``password=pw``), so a command that prints a differently formatted DSN still cannot show it."""
    found: list[str] = []
    url = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:([^@\s]+)@", dsn)
    if url is not None:
        from urllib.parse import unquote

        found += [url.group(1), unquote(url.group(1))]
    for match in re.finditer(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", dsn):
        value = match.group(1)
        found.append(value[1:-1].replace("\\'", "'") if value.startswith("'") else value)
    return [v for v in dict.fromkeys(found) if len(v) >= _MIN_NAMED_SECRET]


class Redactor:
    """Replaces secret environment values in strings and JSON-like structures.

    Secret values are re-read from the environment on every call (values may change while a runtime
    lives), through the mapping's public interface only. The candidate variable *names* are cached and
    re-matched when the number of variables changes or :data:`NAMES_REFRESH_S` passed; the values found
    are cached by their tuple.
    """

    __slots__ = ("_cache", "_candidates", "_environ", "_literals", "_merged", "_named")

    def __init__(self, secret_env_names: Iterable[str] = (), environ: Mapping[str, str] | None = None):
        self._named: set[str] = {n for n in secret_env_names if n}
        self._environ = environ
        self._cache: tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None = None
        self._candidates: tuple[int, float, tuple[str, ...]] | None = None
        self._literals: frozenset[str] = frozenset()
        self._merged: tuple[tuple[str, ...], int, tuple[str, ...]] | None = None

    def add_secret(self, value: str) -> None:
        """Registers a secret *value* this redactor always replaces (a literal from a config file, such as
        an MCP server's ``Authorization`` header or the password inside a DSN); shorter than 4 characters
        is ignored (it would mask ordinary text)."""
        if len(value) >= _MIN_NAMED_SECRET:
            self._literals = self._literals | {value}
            self._merged = None

    def add_secret_env(self, name: str) -> None:
        """Registers one more env var name whose value is always a secret."""
        if name:
            self._named.add(name)
            self._cache = None
            self._candidates = None

    def secrets(self) -> tuple[str, ...]:
        """Current secret values, longest first: the secret environment values, the literals given to
        :meth:`add_secret` and the process-wide ones of :func:`register_secret`."""
        values = self._env_secrets()
        if not self._literals and not _PROCESS_SECRETS:
            return values
        merged = self._merged
        if merged is not None and merged[0] is values and merged[1] == _PROCESS_VERSION[0]:
            return merged[2]
        combined = tuple(sorted({*values, *self._literals, *_PROCESS_SECRETS}, key=len, reverse=True))
        self._merged = (values, _PROCESS_VERSION[0], combined)
        return combined

    def _env_secrets(self) -> tuple[str, ...]:
        env = self._environ if self._environ is not None else os.environ
        count, now = len(env), time.monotonic()
        candidates = self._candidates
        if candidates is None or candidates[0] != count or now - candidates[1] >= NAMES_REFRESH_S:
            # listing os.environ decodes every name (~13 us for 35 variables; this runs for every
            # persisted or live event), so the names are listed again when their number changed or
            # NAMES_REFRESH_S passed; the values of the candidates are read on every call
            names = tuple(n for n in env if n in self._named or SECRET_ENV_NAME.search(n))
            candidates = self._candidates = (count, now, names)
        return self._decoded(env, candidates[2])

    def _decoded(self, env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, ...]:
        found: list[tuple[str, str]] = []
        for name in names:
            value = env.get(name)
            if value is None:
                continue
            minimum = _MIN_NAMED_SECRET if name in self._named else _MIN_PATTERN_SECRET
            if len(value) >= minimum:
                found.append((name, value))
        key = tuple(found)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        values = tuple(sorted({v for _, v in found}, key=len, reverse=True))
        self._cache = (key, values)
        return values

    def text(self, value: str) -> str:
        for secret in self.secrets():
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def contains_secret(self, value: str) -> bool:
        return any(s in value for s in self.secrets())

    def bytes(self, value: bytes) -> bytes:
        for secret in self.secrets():
            raw = secret.encode("utf-8")
            if raw in value:
                value = value.replace(raw, REDACTED.encode())
        return value

    def value(self, obj: Any) -> Any:
        """Deep-redacts strings inside dicts/lists/tuples; other values are returned unchanged."""
        secrets = self.secrets()
        if not secrets:
            return obj
        return _walk(obj, secrets)


def _walk(obj: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(obj, str):
        for secret in secrets:
            if secret in obj:
                obj = obj.replace(secret, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {_walk(k, secrets) if isinstance(k, str) else k: _walk(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        if obj and _STRINGS.issuperset(map(type, obj)):
            # fast path for long id lists (e.g. context reports): one scan of the joined text; a secret
            # never holds a NUL, so it cannot match across the separator
            joined = "\0".join(obj)
            if not any(secret in joined for secret in secrets):
                return list(obj)
        return [_walk(v, secrets) for v in obj]
    return obj


def redact_with(obj: Any, secrets: tuple[str, ...]) -> Any:
    """Deep-redacts ``obj`` with a secret set computed once by :meth:`Redactor.secrets` (hot paths)."""
    return _walk(obj, secrets) if secrets else obj


def _is_token_count(key: str, value: Any) -> bool:
    """Token *counters* (``input_tokens``, ``token_budget`` ...) hold numbers, not credentials."""
    if not TOKEN_COUNT_KEY.search(key):
        return False
    if isinstance(value, dict):
        return all(_is_number(v) or v is None for v in value.values())
    return _is_number(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_SCALARS = frozenset({str, int, float, bool, type(None)})
_STRINGS = frozenset({str})
_KEY_VERDICTS: dict[str, bool] = {}
_KEY_VERDICTS_LIMIT = 4096


def _sensitive_key(key: str) -> bool:
    """``SENSITIVE_KEY.search(key)``, memoised (payload keys repeat across thousands of records)."""
    verdict = _KEY_VERDICTS.get(key)
    if verdict is None:
        verdict = SENSITIVE_KEY.search(key) is not None
        if len(_KEY_VERDICTS) >= _KEY_VERDICTS_LIMIT:
            _KEY_VERDICTS.clear()
        _KEY_VERDICTS[key] = verdict
    return verdict


def _masked(key: Any, value: Any) -> bool:
    return (
        isinstance(key, str)
        and _sensitive_key(key)
        and value is not None
        and not isinstance(value, bool)
        and not _is_token_count(key, value)
    )


def has_sensitive_keys(obj: Any) -> bool:
    """True when :func:`redact_sensitive_keys` would mask something in ``obj`` (a read-only scan, so a
    caller can keep a record unchanged instead of copying it).

    Replay scans every stored payload with it, so the common cases are settled at C speed: the
    sensitive keys of a mapping are looked up by its key tuple (payloads of one kind share their keys),
    a mapping or list of scalars needs no descent, and a list of strings (node-id lists) is recognised
    by joining it."""
    if isinstance(obj, dict):
        shape = tuple(obj)
        odd = _SHAPES.get(shape)
        if odd is None:
            odd = _learn_shape(shape)
        for key, counter in odd:
            value = obj[key]
            if value is not None and not isinstance(value, bool) and not (counter and _counts(value)):
                return True
        values: Any = obj.values()
    elif isinstance(obj, list | tuple):
        if obj and type(obj[0]) is str:
            try:
                "".join(obj)  # C speed; a non-string item raises
                return False
            except TypeError:
                pass
        values = obj
    else:
        return False
    if _SCALARS.issuperset(map(type, values)):  # C-speed check: no container inside
        return False
    for value in values:  # noqa: SIM110 (a plain loop: no generator frame per level; blocks nest deep)
        if isinstance(value, dict | list | tuple) and has_sensitive_keys(value):
            return True
    return False


_SHAPES: dict[tuple[Any, ...], tuple[tuple[str, bool], ...]] = {}
"""Key tuple of a mapping → its sensitive keys, each with whether it names a token counter."""
_SHAPE_MAX_KEYS = 64


def _learn_shape(shape: tuple[Any, ...]) -> tuple[tuple[str, bool], ...]:
    odd = tuple(
        (k, TOKEN_COUNT_KEY.search(k) is not None) for k in shape if isinstance(k, str) and _sensitive_key(k)
    )
    if len(shape) <= _SHAPE_MAX_KEYS:
        if len(_SHAPES) >= _KEY_VERDICTS_LIMIT:
            _SHAPES.clear()
        _SHAPES[shape] = odd
    return odd


_COUNTS = frozenset({int, float, type(None)})


def _counts(value: Any) -> bool:
    """The value of a token-counter key is exempt (:func:`_is_token_count`, key already matched)."""
    if isinstance(value, dict):
        if _COUNTS.issuperset(map(type, value.values())):
            return True
        return all(_is_number(v) or v is None for v in value.values())
    return _is_number(value)


def texts_may_hold_keys(texts: Sequence[str | None], chunk: int = 256) -> list[bool]:
    """Per JSON text: ``False`` only when it certainly holds no key :func:`redact_sensitive_keys` could
    mask (``None`` holds none). A read-time prefilter checked a chunk of texts at a time (joined, one
    C-speed substring scan per word): a chunk with a sensitive word, a ``\\u`` escape (which can spell a
    key) or a non-ASCII character (the regex folds some onto ASCII letters) flags all its texts, whose
    decoded values the caller then walks with :func:`has_sensitive_keys`. A text that occurs several
    times (payloads of one kind often repeat verbatim) is scanned once and gets one verdict."""
    distinct = list(dict.fromkeys(texts))
    if len(distinct) == len(texts):
        return _scan_texts(distinct, chunk)
    verdict = dict(zip(distinct, _scan_texts(distinct, chunk), strict=True))
    return [verdict[t] for t in texts]


def _scan_texts(texts: Sequence[str | None], chunk: int) -> list[bool]:
    out: list[bool] = []
    for start in range(0, len(texts), chunk):
        part = [t or "" for t in texts[start : start + chunk]]
        joined = "\n".join(part)
        hit = "\\u" in joined or not joined.isascii()
        if not hit:
            words = _EXEMPT_COUNTER_KEY.sub("", joined.lower())
            hit = any(map(words.__contains__, _SENSITIVE_WORDS))
        out += [hit] * len(part)
    return out


_EXEMPT_COUNTER_KEY = re.compile(
    r'token(?:s|_count|_budget)[^"\\]*"\s*:\s*'
    r'(?=-|[0-9]|null|\{(?:\s*"[^"\\]*"\s*:\s*(?:-?[0-9][0-9.e+-]*|null)\s*,?)*\s*\})'
)
"""In lower-cased JSON text: the end (from its ``token…`` word) of a key :data:`TOKEN_COUNT_KEY` matches whose
value is a number, ``null`` or an object of numbers / ``null`` — a key :func:`redact_sensitive_keys` never
masks (:func:`_is_token_count`). :func:`texts_may_hold_keys` removes these before its word scan, so the
usage counters every event carries do not flag the chunk; the start of the key and an object value's own
keys stay and are scanned. In valid JSON no bare word outside a string contains ``token``, and the first
unescaped ``"`` after it closes that string: followed by ``:``, the string is a key."""


_SENSITIVE_WORDS = (
    *("apikey", "api_key", "api-key", "authorization", "token"),
    *("secret", "password", "cookie", "credential"),
)
"""Every ASCII string :data:`SENSITIVE_KEY` matches contains one of these (case-folded); keep in sync."""


def redact_sensitive_keys(obj: Any) -> Any:
    """Read-time redaction: masks values under sensitive-looking mapping keys, recursively (numeric token
    counters such as ``usage.input_tokens`` or ``token_budget`` stay readable)."""
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if _masked(k, v):
                out[k] = REDACTED
            else:
                out[k] = redact_sensitive_keys(v)
        return out
    if isinstance(obj, list | tuple):
        if _SCALARS.issuperset(map(type, obj)):  # no mapping inside: nothing to mask (e.g. id lists)
            return list(obj)
        return [redact_sensitive_keys(v) for v in obj]
    return obj


default_redactor = Redactor()
"""Process-level redactor covering pattern-named secret env vars (used where no runtime is known)."""
