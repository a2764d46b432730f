"""The network rules of ``code.web_fetch`` (pure) and the fetch client's address pinning (issue 37 item 4).

The client tests run a local page server on 127.0.0.1 and give the client a resolver of their own, which
stands for DNS: what it answers is what the client must check and connect to — never a second lookup.
"""

from __future__ import annotations

import gzip
import ipaddress

import pytest

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.permissions._network import NetworkRules, address_kind
from agent_core.tools._web_fetch.client import FetchPolicy, WebClient
from tests.fixtures.web_pages import PageServer


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("172.16.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("fc00::1", "private"),
        ("93.184.216.34", None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
    ],
)
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind


def test_allowed_private_networks_open_only_what_they_list() -> None:
    rules = NetworkRules(private_networks=["127.0.0.1/32", "10.0.0.0/8"])
    assert rules.address_refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert rules.address_refusal(ipaddress.ip_address("::ffff:127.0.0.1")) is None  # the same address
    assert rules.address_refusal(ipaddress.ip_address("10.200.0.1")) is None
    assert rules.address_refusal(ipaddress.ip_address("127.0.0.2")) == "loopback"
    assert rules.address_refusal(ipaddress.ip_address("::1")) == "loopback"
    assert NetworkRules().address_refusal(ipaddress.ip_address("127.0.0.1")) == "loopback"


def test_denied_domains_cover_subdomains_and_beat_the_allow_list() -> None:
    rules = NetworkRules(
        allowed_hosts=["api.example.com"],
        allowed_domains=["example.com"],
        denied_domains=["*.internal.example.com"],
    )
    assert rules.host_allowed("API.Example.com.") and rules.host_allowed("docs.example.com")
    assert rules.host_denied("internal.example.com") and rules.host_denied("a.b.internal.example.com")
    assert not rules.host_allowed("x.internal.example.com")
    assert not rules.host_denied("notinternal.example.com")
    assert not rules.host_allowed("example.org")


def _client(resolve_to: list[str], networks: list[str]) -> tuple[WebClient, list[str]]:
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return list(resolve_to)

    rules = NetworkRules(allowed_hosts=["pinned.invalid"], private_networks=networks)
    return WebClient(FetchPolicy(rules), resolve=resolve), asked


async def test_the_connection_goes_to_the_checked_address(page_server: PageServer) -> None:
    # "pinned.invalid" never resolves in DNS: the fetch works only because the client connects to the
    # address its own lookup returned and checked, instead of letting the HTTP stack resolve the name again
    page_server.page("/", "<p>pinned</p>")
    client, asked = _client(["127.0.0.1"], ["127.0.0.1/32"])
    result = await client.fetch(f"http://pinned.invalid:{page_server.port}/", max_bytes=1000)
    assert result.status == 200 and result.body == b"<p>pinned</p>" and result.address == "127.0.0.1"
    assert asked == ["pinned.invalid"]  # looked up once


async def test_one_refused_address_refuses_the_host(page_server: PageServer) -> None:
    client, _ = _client(["127.0.0.1", "127.0.0.2"], ["127.0.0.1/32"])
    with pytest.raises(AgentCoreError) as caught:
        await client.fetch(f"http://pinned.invalid:{page_server.port}/", max_bytes=1000)
    assert caught.value.code == ErrorCode.permission_denied
    assert caught.value.details["address"] == "127.0.0.2"
    assert page_server.requests == []


async def test_a_compressed_body_stops_at_max_bytes(page_server: PageServer) -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)
    page_server.page("/z", bomb, content_type="text/plain", headers={"Content-Encoding": "gzip"})
    client, _ = _client(["127.0.0.1"], ["127.0.0.1/32"])
    result = await client.fetch(f"http://pinned.invalid:{page_server.port}/z", max_bytes=4096)
    assert result.truncated and len(result.body) == 4096


async def test_a_small_compressed_body_is_decoded_whole(page_server: PageServer) -> None:
    page_server.page(
        "/z", gzip.compress(b"hello " * 100), content_type="text/plain", headers={"Content-Encoding": "gzip"}
    )
    client, _ = _client(["127.0.0.1"], ["127.0.0.1/32"])
    result = await client.fetch(f"http://pinned.invalid:{page_server.port}/z", max_bytes=4096)
    assert not result.truncated and result.body == b"hello " * 100
