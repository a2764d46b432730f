"""The network rules of ``[permissions.network_policy]`` and ``[tools.network]`` (pure; no I/O).

* Hosts: the allow-list is the union of both sections' ``allowed_hosts`` (exact names, case-insensitive,
  a trailing dot ignored) and ``allowed_domains`` (a domain matches itself and every subdomain; a leading
  ``*.`` is ignored). ``tools.network.denied_domains`` lists domains (with their subdomains) that no
  network call may reach; a denied host is denied whatever the allow-lists and permission rules say.
* Addresses: a connection may go to a public unicast address, or to one inside
  ``tools.network.allowed_private_networks``. Loopback, private, link-local, shared (carrier-grade NAT),
  multicast, reserved and unspecified addresses are refused otherwise; an IPv6 address that embeds an
  IPv4 one (IPv4-mapped, NAT64 ``64:ff9b::/96``, 6to4, Teredo) is judged by the embedded address too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from agent_core.config.schema import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PRIVATE_NETWORKS_KEY = "tools.network.allowed_private_networks"
DENIED_DOMAINS_KEY = "tools.network.denied_domains"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SHARED = ipaddress.ip_network("100.64.0.0/10")


def normalise_host(host: str) -> str:
    """Lower case, no surrounding whitespace, brackets (``[::1]``) or trailing dot."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def _domain(value: str) -> str:
    name = normalise_host(value)
    return name[2:] if name.startswith("*.") else name.lstrip(".")


def _within(name: str, domains: Iterable[str]) -> bool:
    return any(name == d or name.endswith("." + d) for d in domains)


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def address_kind(address: IPAddress) -> str | None:
    """Why ``address`` is not public (``"loopback"``, ``"private"``, ...), ``None`` for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            kind = address_kind(embedded)
            if kind is not None:
                return kind
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared (carrier-grade NAT)", isinstance(address, ipaddress.IPv4Address) and address in _SHARED),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    )
    for kind, matches in checks:
        if matches:
            return kind
    return None if address.is_global else "non-public"


class NetworkRules:
    """Host allow/deny lists and the private networks a connection may reach (see the module docstring)."""

    def __init__(
        self,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_domains: Iterable[str] = (),
        denied_domains: Iterable[str] = (),
        private_networks: Iterable[str] = (),
    ) -> None:
        self._hosts = frozenset(normalise_host(h) for h in allowed_hosts if h.strip())
        self._domains = frozenset(_domain(d) for d in allowed_domains if d.strip())
        self._denied = frozenset(_domain(d) for d in denied_domains if d.strip())
        self._private = tuple(ipaddress.ip_network(n.strip(), strict=False) for n in private_networks)

    @classmethod
    def from_settings(cls, settings: Settings) -> NetworkRules:
        policy, net = settings.permissions.network_policy, settings.tools.network
        return cls(
            allowed_hosts=(*policy.allowed_hosts, *net.allowed_hosts),
            allowed_domains=(*policy.allowed_domains, *net.allowed_domains),
            denied_domains=net.denied_domains,
            private_networks=net.allowed_private_networks,
        )

    def host_allowed(self, host: str | None) -> bool:
        """An allow-listed host, or one equal to / below an allow-listed domain (and not denied)."""
        if not host:
            return False
        name = normalise_host(host)
        if self.host_denied(name):
            return False
        return name in self._hosts or _within(name, self._domains)

    def host_denied(self, host: str | None) -> bool:
        """The host is, or is below, a ``denied_domains`` entry."""
        return bool(host) and _within(normalise_host(host or ""), self._denied)

    def address_refusal(self, address: IPAddress) -> str | None:
        """Why a connection to ``address`` is refused (its kind), ``None`` when it may be made."""
        kind = address_kind(address)
        if kind is None:
            return None
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address):
            embedded = _embedded_v4(address)
            if embedded is not None:
                candidates.append(embedded)
        for network in self._private:
            if any(a.version == network.version and a in network for a in candidates):
                return None
        return kind
