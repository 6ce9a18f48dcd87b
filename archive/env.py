"""Read typed settings from environment variables, failing at start-up with a clear message.

Every reader takes the variable's name and its documented default; a value that does not parse
raises ``ImproperlyConfigured`` naming the variable, so a typo never surfaces later as a traceback
in the middle of a crawl.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    """Return the variable's value, or ``default`` when it is unset."""
    return os.environ.get(name, default)


def is_cron(expression: str) -> bool:
    """Whether ``expression`` is five cron fields (minute hour day-of-month month day-of-week)
    that croniter can read, the one cron reader of both the settings and crawl schedules.

    croniter is imported here, on first use: importing it runs ``file`` on the Python binary
    (its 32-bit check, ``platform.architecture()``), some 15 ms of every command's start-up
    when it was imported with the settings."""
    from croniter import croniter

    return len(expression.split()) == 5 and croniter.is_valid(expression)


def env_cron(name: str, default: str) -> str:
    """Return the variable as a five-field cron expression (``is_cron``), or ``default``
    (which the settings' own tests check) when it is unset.

    Raises ImproperlyConfigured for anything else.
    """
    if name not in os.environ:
        return default
    expression = os.environ[name]
    if not is_cron(expression):
        raise ImproperlyConfigured(
            f"{name}={expression!r}: not a cron expression of five fields "
            "(minute hour day month weekday), e.g. '30 3 * * *'"
        )
    return expression


def env_bool(name: str, default: bool) -> bool:
    """Return the variable as a boolean (1/true/yes/on, 0/false/no/off).

    Raises ImproperlyConfigured for any other word.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_number(name: str, default: float, *, minimum: float = 0, kind: type = float) -> float:
    """Return the variable as a number of ``kind`` (int or float), at least ``minimum``.

    Raises ImproperlyConfigured when it does not parse or is below ``minimum``.
    """
    raw = os.environ.get(name)
    if raw is None:
        return kind(default)
    try:
        value = kind(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a {kind.__name__}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """Return the variable as an int, at least ``minimum`` (see ``env_number``)."""
    return int(env_number(name, default, minimum=minimum, kind=int))


def env_list(name: str, default: list[str]) -> list[str]:
    """Return a comma-separated variable as a list of non-empty, stripped strings."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_json_object(name: str, default: dict) -> dict:
    """Return the variable parsed as a JSON object (RFC 8259), or ``default`` when unset.

    Raises ImproperlyConfigured when it is not valid JSON or not an object.
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return dict(default)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f'{name} must be a JSON object, like {{"wget": {{...}}}}')
    return value


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file only its owner can read (mode 0600 from the start)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def env_path(name: str, default: Path) -> Path:
    """Return the variable as an absolute path (relative ones are taken from the working dir)."""
    return Path(os.environ.get(name, str(default))).expanduser().resolve()


def env_networks(name: str, default: list[str]) -> list[tuple[IPNetwork, int | None]]:
    """Return a comma-separated list of networks, each ``CIDR`` or ``CIDR:port``, as
    ``(network, port or None)``. An IPv6 network with a port is bracketed: ``[::1]/128:8000``;
    a bare address is a network of one (``127.0.0.1`` is ``127.0.0.1/32``).

    Raises ImproperlyConfigured naming the entry that does not parse.
    """
    return [_network_entry(name, entry) for entry in env_list(name, default)]


def _network_entry(name: str, entry: str) -> tuple[IPNetwork, int | None]:
    network, port = entry, None
    if entry.startswith("["):
        network, _, rest = entry[1:].partition("]")
        network += rest.split(":", 1)[0]
        port = rest.split(":", 1)[1] if ":" in rest else None
    elif entry.count(":") == 1:
        network, port = entry.split(":")
    try:
        parsed = ipaddress.ip_network(network.strip(), strict=False)
        number = None if port is None else int(port)
    except ValueError as error:
        raise ImproperlyConfigured(
            f"{name}: {entry!r} is not CIDR or CIDR:port ({error})"
        ) from None
    if number is not None and not 0 < number < 65536:
        raise ImproperlyConfigured(f"{name}: {entry!r} has a port outside 1-65535")
    return parsed, number
