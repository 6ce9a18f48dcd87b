"""The address policy: which IP addresses Vellum may fetch from (DESIGN.md §8).

An archive fetches what strangers point it at, so a seed, a redirect, a page requisite or a
webhook must not reach the machine's own services or its private network: the cloud's metadata
service at 169.254.169.254, Redis on 127.0.0.1:6379, a router's admin page on 10.0.0.1. Every
address is checked after DNS resolution, and the connection is made to the checked address, so
a name cannot resolve to one address for the check and another for the fetch (DNS rebinding).

Only globally routable unicast addresses pass: those that the IANA special-purpose address
registries (RFC 6890, with RFC 8190's updates) mark global, less multicast. IPv6 forms that
carry an IPv4 address (IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible ``::/96``, 6to4
``2002::/16``, Teredo ``2001::/32``, NAT64 ``64:ff9b::/96``) must also pass with that IPv4
address. ``settings.ALLOWED_PRIVATE_NETWORKS`` opens networks (or one port of them) that a
deployment needs.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Opened networks, as settings.ALLOWED_PRIVATE_NETWORKS holds them: (network, port or None).
Networks = Sequence[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int | None]]

NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291 §2.5.5.1, deprecated
# Never global, though Python 3.11's ipaddress may call them so: site-local (RFC 3879,
# deprecated), local-use NAT64 (RFC 8215) and IPv4-translated addresses (RFC 2765).
NOT_GLOBAL = tuple(
    ipaddress.ip_network(network) for network in ("fec0::/10", "64:ff9b:1::/48", "::ffff:0:0:0/96")
)

# What a refused address is, in the words of RFC 6890's registry, checked in this order.
KINDS = (
    ("unspecified", lambda ip: ip.is_unspecified),
    ("loopback", lambda ip: ip.is_loopback),
    ("link-local", lambda ip: ip.is_link_local),
    ("multicast", lambda ip: ip.is_multicast),
    ("unique-local", lambda ip: ip.version == 6 and ip in ipaddress.ip_network("fc00::/7")),
    ("private", lambda ip: ip.is_private),
)


ARTICLES = {"unspecified": "an"}  # "a unique-local", "a link-local", …


class AddressRefused(Exception):
    """A host resolved only to addresses the policy refuses; the message says which and why
    ("localhost: ::1 is a loopback address")."""


@dataclass(frozen=True)
class Refusal:
    """One fetch the policy refused: what was asked for (a URL, or ``host:port`` for a tunnel)
    and why."""

    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.target}: {self.reason}"


def refusal_reason(address: str | IPAddress, port: int, *, also: Networks = ()) -> str | None:
    """Return why ``address`` (an IP, either family, as text or object) may not be fetched
    on ``port`` ("127.0.0.1 is a loopback address"), or None when it may. ``also`` opens more
    networks than ALLOWED_PRIVATE_NETWORKS, in its form: ``(network, port or None)`` pairs."""
    return _refusal_reason(str(address), port, (*settings.ALLOWED_PRIVATE_NETWORKS, *also))


@lru_cache(maxsize=1024)
def _refusal_reason(address: str, port: int, opened: Networks) -> str | None:
    """``refusal_reason`` with the networks it opens given: a function of its arguments alone,
    so the answer is kept (the egress proxy asks once per connection, some 15 times a page for
    the same address, and the ``ipaddress`` checks were most of what a connection cost it)."""
    ip = ipaddress.ip_address(address)
    if _opened(ip, port, opened):
        return None
    # The IPv4 address an IPv6 one carries first: ::ffff:169.254.169.254 is link-local.
    for candidate in (*_embedded_ipv4(ip), ip):
        kind = _kind(candidate)
        if kind:
            shown = str(ip) if candidate == ip else f"{ip} (that is {candidate})"
            return f"{shown} is {ARTICLES.get(kind, 'a')} {kind} address"
    return None


def resolve_allowed(host: str, port: int, *, also: Networks = ()) -> list[tuple[int, str]]:
    """Resolve ``host`` (a name or an IP literal) and return the ``(family, address)`` pairs
    that the policy (and ``also``, see refusal_reason) lets Vellum connect to on ``port``, in
    resolver order.

    Raises AddressRefused when every address is refused, and OSError (socket.gaierror) when the
    name does not resolve.
    """
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    allowed, reasons = [], []
    for family, _type, _proto, _name, sockaddr in infos:
        reason = refusal_reason(sockaddr[0], port, also=also)
        if reason is None:
            allowed.append((family, sockaddr[0]))
        elif reason not in reasons:
            reasons.append(reason)
    if not allowed:
        literal = reasons[0].startswith(host.strip("[]") + " ")
        raise AddressRefused(reasons[0] if literal else f"{host}: {reasons[0]}")
    return list(dict.fromkeys(allowed))


def refused_message(refusal: object) -> str:
    """Return how a refusal reads in logs and results, with what opens it."""
    return f"refused by the address policy: {refusal} (ALLOWED_PRIVATE_NETWORKS opens it)"


def _opened(ip: IPAddress, port: int, networks: Networks) -> bool:
    mapped = getattr(ip, "ipv4_mapped", None)
    for network, only_port in networks:
        if only_port is not None and only_port != port:
            continue
        if ip in network or (mapped is not None and mapped in network):
            return True
    return False


def _kind(ip: IPAddress) -> str | None:
    special = ip.version == 6 and any(ip in network for network in NOT_GLOBAL)
    if ip.is_global and not ip.is_multicast and not special:
        return None
    for kind, test in KINDS:
        if test(ip):
            return kind
    return "reserved"  # special-purpose but none of the above: shared (100.64/10), benchmarking


def _embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """Return the IPv4 addresses an IPv6 address carries (mapped, compatible, 6to4, Teredo,
    NAT64); none for an IPv4 address."""
    if ip.version == 4:
        return []
    found = [ip.ipv4_mapped, ip.sixtofour, ip.teredo and ip.teredo[1]]
    if ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return [address for address in found if address is not None]
