"""The HTTP(S) GET of ``code.web_fetch``: every hop checked, the connection made to a checked address.

For each hop (the URL, then each redirect target):

1. the URL must be ``http``/``https`` without credentials (``validation_error`` otherwise);
2. a host in ``tools.network.denied_domains`` is refused (``permission_denied``);
3. a redirect to another host is followed only when that host is allow-listed or
   ``permissions.network_policy.default = "allow"``; otherwise the fetch stops and reports the location
   (the model fetches it with a new call, which goes through the permission gate for that host);
4. the host is resolved once; every address it resolves to must be public or inside
   ``tools.network.allowed_private_networks`` (``permission_denied`` naming the address otherwise);
5. the connection goes to one of exactly those checked addresses (the network backend below ignores the
   host name httpcore passes it), so a DNS answer that changes between the check and the connection
   (DNS rebinding) cannot move the request elsewhere. TLS still verifies the certificate against the
   URL's host name (httpcore passes it as the server name).

The body is read up to ``max_bytes`` (after gzip/deflate decoding, so a compressed bomb stops there too);
a longer body is cut (``truncated``). No proxy environment variable, cookie or credential is used. Timeouts
raise ``timeout``; DNS, connection, TLS and protocol failures ``internal_error`` with ``details.reason``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import zlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpcore
import httpx

from agent_core.errors import AgentCoreError, ErrorCode, error_for
from agent_core.permissions._network import (
    DENIED_DOMAINS_KEY,
    PRIVATE_NETWORKS_KEY,
    IPAddress,
    NetworkRules,
    normalise_host,
)

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: the name lookup (the system resolver unless a test passes another)."""

MAX_REDIRECTS = 10
HOP_TIMEOUT_S = 30.0
"""Connect, write and read timeout of one hop (each read waits at most this long for data)."""
TOTAL_TIMEOUT_S = 120.0
"""The whole fetch, redirects included."""
READ_CHUNK = 64 * 1024
USER_AGENT = "soong-agent (code.web_fetch)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """What the fetch may reach: the host and address rules and ``permissions.network_policy.default``."""

    rules: NetworkRules
    default: Literal["allow", "confirm", "deny"] = "confirm"


@dataclass(slots=True)
class FetchResult:
    url: str
    """The URL of the response (after the redirects that were followed)."""
    status: int
    content_type: str
    body: bytes
    truncated: bool
    """The body was longer than ``max_bytes`` and was cut there."""
    declared_length: int | None
    """The ``Content-Length`` the server announced, when it did."""
    address: str
    """The address the response came from."""
    redirects: list[str] = field(default_factory=list)
    """Redirect targets followed, in order."""
    unfollowed_redirect: str | None = None
    """A redirect to another host that is not allow-listed: its location, not fetched."""


def _error(code: ErrorCode, message: str, **details: Any) -> AgentCoreError:
    return error_for(code, message, details=details, retryable=code == ErrorCode.timeout)


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (system resolver), in the resolver's order, without repeats."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def parse_url(raw: str) -> httpx.URL:
    """A checked absolute ``http``/``https`` URL (``validation_error`` otherwise)."""
    try:
        url = httpx.URL(raw.strip())
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise _error(ErrorCode.validation_error, f"invalid URL {raw!r}: {exc}", url=raw) from exc
    if url.scheme not in ("http", "https"):
        raise _error(
            ErrorCode.validation_error, f"only http:// and https:// URLs can be fetched, not {raw!r}", url=raw
        )
    if not url.host:
        raise _error(ErrorCode.validation_error, f"URL {raw!r} names no host", url=raw)
    if url.userinfo:
        raise _error(
            ErrorCode.validation_error,
            "URLs with credentials (user:password@host) are not fetched",
            url=str(url.copy_with(username=None, password=None)),
        )
    return url


def url_host(url: httpx.URL) -> str:
    """The URL's host as the rules see it: ASCII (IDNA), lower case, no brackets or trailing dot."""
    return normalise_host(url.raw_host.decode("ascii"))


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the checked addresses only, whatever host name httpcore asks for."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self._addresses = list(addresses)
        self._inner = httpcore.AnyIOBackend()
        self.connected: str | None = None

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in self._addresses:
            try:
                stream = await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            self.connected = address
            return stream
        raise failure or httpcore.ConnectError(f"no address to connect to for {host}")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("code.web_fetch connects over TCP only")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class WebClient:
    """One fetch at a time per call; a new connection pool per hop (no connection is reused)."""

    def __init__(self, policy: FetchPolicy, *, resolve: Resolver | None = None) -> None:
        self.policy = policy
        self._resolve = resolve or system_resolve

    async def fetch(self, raw_url: str, *, max_bytes: int, timeout_s: float = TOTAL_TIMEOUT_S) -> FetchResult:
        """GETs ``raw_url`` following the rules of the module docstring."""
        url = parse_url(raw_url)
        first_host = url_host(url)
        redirects: list[str] = []
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    result, location = await self._hop(url, max_bytes)
                    if location is None:
                        result.redirects = redirects
                        return result
                    if len(redirects) >= MAX_REDIRECTS:
                        raise _error(
                            ErrorCode.internal_error,
                            f"more than {MAX_REDIRECTS} redirects (last to {location})",
                            reason="redirects",
                            redirects=redirects,
                        )
                    target = parse_url(str(url.join(location)))
                    host = url_host(target)
                    if host != first_host and not self._may_follow(host):
                        result.redirects = redirects
                        result.unfollowed_redirect = str(target)
                        return result
                    redirects.append(str(target))
                    url = target
        except TimeoutError:
            raise _error(
                ErrorCode.timeout, f"fetching {raw_url} took longer than {timeout_s:.0f} s", url=raw_url
            ) from None

    def _may_follow(self, host: str) -> bool:
        return self.policy.default == "allow" or self.policy.rules.host_allowed(host)

    async def _addresses(self, url: httpx.URL, host: str) -> list[str]:
        """The checked addresses of the hop's host (every one must pass; see the module docstring)."""
        if self.policy.rules.host_denied(host):
            raise _error(
                ErrorCode.permission_denied,
                f"{host} is in {DENIED_DOMAINS_KEY}: not fetched",
                host=host,
                config_key=DENIED_DOMAINS_KEY,
            )
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            found = [str(literal)]
        else:
            try:
                found = await self._resolve(host, port)
            except OSError as exc:
                raise _error(
                    ErrorCode.internal_error, f"cannot resolve {host}: {exc}", reason="dns", host=host
                ) from exc
            if not found:
                raise _error(ErrorCode.internal_error, f"{host} has no address", reason="dns", host=host)
        for text in found:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            kind = self.policy.rules.address_refusal(address)
            if kind is not None:
                named = host if host == str(address) else f"{host} ({address})"
                raise _error(
                    ErrorCode.permission_denied,
                    f"{named} is a {kind} address; code.web_fetch connects only to public addresses unless "
                    f"{PRIVATE_NETWORKS_KEY} lists it",
                    host=host,
                    address=str(address),
                    address_kind=kind,
                    config_key=PRIVATE_NETWORKS_KEY,
                )
        return found

    async def _hop(self, url: httpx.URL, max_bytes: int) -> tuple[FetchResult, str | None]:
        """One request: the response (body read unless it redirects) and the redirect location."""
        host = url_host(url)
        backend = _PinnedBackend(await self._addresses(url, host))
        timeouts = {
            "connect": HOP_TIMEOUT_S,
            "read": HOP_TIMEOUT_S,
            "write": HOP_TIMEOUT_S,
            "pool": HOP_TIMEOUT_S,
        }
        headers = [
            (b"User-Agent", USER_AGENT.encode()),
            (b"Accept", b"text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,*/*;q=0.5"),
            (b"Accept-Encoding", b"gzip, deflate"),
        ]
        try:
            async with (
                httpcore.AsyncConnectionPool(network_backend=backend, max_connections=1, retries=0) as pool,
                pool.stream("GET", str(url), headers=headers, extensions={"timeout": timeouts}) as response,
            ):
                fields = _headers(response.headers)
                location = fields.get("location")
                if response.status in _REDIRECTS and location:
                    empty = FetchResult(
                        url=str(url),
                        status=response.status,
                        content_type=fields.get("content-type", ""),
                        body=b"",
                        truncated=False,
                        declared_length=None,
                        address=backend.connected or "",
                    )
                    return empty, location
                body, truncated = await _read_body(response, fields.get("content-encoding", ""), max_bytes)
                return (
                    FetchResult(
                        url=str(url),
                        status=response.status,
                        content_type=fields.get("content-type", ""),
                        body=body,
                        truncated=truncated,
                        declared_length=_length(fields.get("content-length")),
                        address=backend.connected or "",
                    ),
                    None,
                )
        except (httpcore.ConnectTimeout, httpcore.ReadTimeout, httpcore.WriteTimeout, httpcore.PoolTimeout):
            raise _error(
                ErrorCode.timeout, f"{url} did not answer within {HOP_TIMEOUT_S:.0f} s", url=str(url)
            ) from None
        except httpcore.ConnectError as exc:
            reason = "tls" if "SSL" in str(exc) or "certificate" in str(exc).lower() else "connect"
            raise _error(
                ErrorCode.internal_error, f"cannot connect to {url}: {exc}", reason=reason, url=str(url)
            ) from exc
        except (httpcore.ProtocolError, httpcore.NetworkError, httpcore.UnsupportedProtocol) as exc:
            raise _error(
                ErrorCode.internal_error, f"fetching {url} failed: {exc}", reason="protocol", url=str(url)
            ) from exc


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names lower-cased; the first value of each name (as latin-1 text)."""
    fields: dict[str, str] = {}
    for name, value in raw:
        fields.setdefault(name.decode("latin-1").lower(), value.decode("latin-1").strip())
    return fields


def _length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


async def _read_body(response: httpcore.Response, encoding: str, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the decoded body and whether there was more."""
    coding = encoding.strip().lower()
    decoder: Any = None
    if coding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif coding == "deflate":
        decoder = zlib.decompressobj()
    elif coding not in ("", "identity"):
        raise _error(
            ErrorCode.internal_error,
            f"unsupported Content-Encoding {encoding!r}",
            reason="protocol",
            content_encoding=encoding,
        )
    parts: list[bytes] = []
    size = 0
    stream = response.aiter_stream()
    async for chunk in stream:
        data = chunk
        if decoder is not None:
            try:
                data = decoder.decompress(chunk, max_bytes - size + 1)
            except zlib.error as exc:
                raise _error(
                    ErrorCode.internal_error, f"cannot decode the {coding} body: {exc}", reason="protocol"
                ) from exc
        parts.append(data)
        size += len(data)
        if size > max_bytes or (decoder is not None and decoder.unconsumed_tail):
            body = b"".join(parts)
            return body[:max_bytes], True
    body = b"".join(parts)
    if decoder is not None:
        body += decoder.flush()
    return body[:max_bytes], len(body) > max_bytes
