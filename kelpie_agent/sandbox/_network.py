"""Which hosts a sandbox's commands may reach: an allow-list of host patterns.

A sandbox has no network by default. :class:`SandboxNetwork` names the hosts it may reach
through the server's filtering proxy (``_proxy.py``); everything else, and any address that is
loopback, link-local, multicast or unspecified (the server itself, cloud metadata services),
is refused whatever the list says.

Patterns (case-insensitive):

=====================  =============================================================
``api.example.com``     that host, any port
``*.example.com``       any subdomain of example.com (not example.com itself)
``api.example.com:443``  that host, port 443 only
``203.0.113.7``         that IPv4 address (``[2001:db8::1]`` for IPv6), any port
=====================  =============================================================
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

import attrs

__all__ = ["MAX_HOSTS", "SandboxNetwork", "check_host_pattern", "refused_address"]

MAX_HOSTS = 100  # patterns in one allow-list
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")
_PORT = re.compile(r"[0-9]{1,5}")


def _split(pattern: str) -> tuple[str, int | None]:
    """``(host, port or None)`` of a pattern, or ValueError naming what is wrong."""
    if pattern.startswith("["):  # [IPv6] or [IPv6]:port
        host, bracket, rest = pattern[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError("an IPv6 address is written [ADDRESS] or [ADDRESS]:PORT")
        port_text = rest[1:] if rest else None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"[{host}] is not an IPv6 address") from None
    else:
        host, colon, port_text_ = pattern.rpartition(":")
        if not colon:
            host, port_text = pattern, None
        else:
            port_text = port_text_
    port: int | None = None
    if port_text is not None:
        if not _PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
        port = int(port_text)
    return host, port


def check_host_pattern(pattern: object) -> str:
    """The pattern, lower-cased, or ValueError saying what is wrong with it."""
    if not isinstance(pattern, str):
        raise ValueError(f"a host pattern is a string, not {type(pattern).__name__}")
    lowered = pattern.strip().lower()
    if not lowered or len(lowered) > 260:
        raise ValueError(f"host pattern {pattern!r} must be 1-260 characters")
    try:
        host, _ = _split(lowered)
    except ValueError as error:
        raise ValueError(f"host pattern {pattern!r}: {error}") from None
    if lowered.startswith("["):
        return lowered
    try:
        ipaddress.IPv4Address(host)
        return lowered
    except ValueError:
        pass
    if not _NAME.fullmatch(host) or len(host) > 253:
        raise ValueError(
            f"host pattern {pattern!r}: use a host name (api.example.com), *.example.com, "
            "an IP address, optionally with :PORT"
        )
    return lowered


def _patterns(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("SandboxNetwork.allow is a list of host patterns, not one string")
    checked = tuple(sorted({check_host_pattern(item) for item in value}))
    if len(checked) > MAX_HOSTS:
        raise ValueError(f"SandboxNetwork.allow has {len(checked)} patterns; at most {MAX_HOSTS}")
    return checked


def refused_address(address: str) -> bool:
    """Addresses no allow-list opens: loopback (the server), link-local (cloud metadata),
    multicast, unspecified and reserved ones."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved
    )


def _matches(pattern: str, host: str, port: int) -> bool:
    name, wanted = _split(pattern)
    if wanted is not None and wanted != port:
        return False
    name = name.strip("[]")
    if name.startswith("*."):
        return host.endswith(name[1:]) and len(host) > len(name) - 1
    return host == name


def _ceiling(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else _patterns(value)


@attrs.frozen
class SandboxNetwork:
    """The hosts a sandbox may reach (none by default); see the module docstring for the
    pattern syntax. ``ceiling``, when set, is a second list every destination must match too
    (the server's list over an agent's own: :meth:`under`)."""

    allow: tuple[str, ...] = attrs.field(default=(), converter=_patterns)
    ceiling: tuple[str, ...] | None = attrs.field(default=None, converter=_ceiling)

    def __bool__(self) -> bool:
        return bool(self.allow) and self.ceiling != ()

    def allows(self, host: str, port: int) -> bool:
        """Whether a command may connect to ``host:port`` (``host`` as the client named it)."""
        host = host.strip().lower().rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not any(_matches(pattern, host, port) for pattern in self.allow):
            return False
        return self.ceiling is None or any(_matches(p, host, port) for p in self.ceiling)

    def under(self, ceiling: SandboxNetwork) -> SandboxNetwork:
        """This list, limited to what ``ceiling`` allows as well."""
        return SandboxNetwork(self.allow, ceiling.allow)
