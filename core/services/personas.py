"""Personas: create or update one from imported cookies and headers, remove one (issue 21)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import idna
from django.db import transaction
from django.utils.text import slugify

from core.extractors.credentials import Credentials, parse_cookies
from crawls.models import Persona
from crawls.seeds import InputError


def persona_save(
    *,
    name: str,
    cookies: str | None = None,
    headers: Sequence[str] = (),
    user_agent: str | None = None,
    description: str | None = None,
    keep_in_warcs: bool | None = None,
    domains: Sequence[str] = (),
) -> Persona:
    """Create the persona ``name``, or update it, and return it.

    ``cookies`` is the text of a Netscape ``cookies.txt`` or a Playwright storage state (JSON);
    given, it replaces the stored cookies. ``headers`` (``"Name: value"`` each), given, replace
    the stored extra headers; ``user_agent``, ``description`` and ``keep_in_warcs`` (None: keep
    as is) set those fields. ``domains`` (host names or domains, each for its subdomains too),
    given, replace the stored ``header_domains``: the headers go to those and to the cookies'
    domains only (Credentials.for_url). Secrets are encrypted before they are saved
    (crawls/persona_store.py). Raises InputError for a name that is no slug, cookies that do
    not parse, a header without a colon or with a line break, or a domain that is no host name.
    """
    if not name or slugify(name) != name:
        raise InputError(f"a persona name is letters, digits, - and _ only, not {name!r}")
    parsed_headers = {}
    for line in headers:
        field, colon, value = line.partition(":")
        if not colon or not field.strip():
            raise InputError(f"a header is 'Name: value', not {line!r}")
        if any(c in line for c in "\r\n\0"):  # RFC 9110 §5.5; the tools read headers from files
            raise InputError(f"header {field.strip()!r}: a line break or NUL is not allowed")
        parsed_headers[field.strip()] = value.strip()
    try:
        parsed_cookies = parse_cookies(cookies) if cookies is not None else None
    except ValueError as error:
        raise InputError(str(error)) from None
    if cookies is not None and not parsed_cookies:
        raise InputError("the cookies file holds no cookie")
    parsed_domains = [persona_domain(domain) for domain in domains]
    with transaction.atomic():
        persona, _ = Persona.objects.select_for_update().get_or_create(name=name)
        try:
            held = persona.credentials()
        except ValueError as error:
            raise InputError(f"{error}: remove the persona and add it again") from None
        persona.set_credentials(
            Credentials(
                cookies=parsed_cookies if parsed_cookies is not None else held.cookies,
                headers=parsed_headers if headers else held.headers,
            )
        )
        if user_agent is not None:
            persona.user_agent = user_agent
        if description is not None:
            persona.description = description
        if keep_in_warcs is not None:
            persona.keep_in_warcs = keep_in_warcs
        if parsed_domains:
            persona.header_domains = list(dict.fromkeys(parsed_domains))
        persona.save()
    return persona


def persona_domain(text: str) -> str:
    """Return ``text`` (a host name, a domain with or without a leading dot, or an IP address)
    as compared with URL hosts: lowercased IDNA ASCII, no leading or trailing dot. Raises
    InputError for anything else."""
    name = text.strip().strip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    try:
        return idna.encode(name, uts46=True).decode("ascii")
    except idna.IDNAError:
        raise InputError(f"not a host name or domain: {text!r}") from None


def persona_remove(*, name: str) -> None:
    """Delete the persona ``name``; its crawls keep their snapshots and name no persona after.
    Raises InputError when there is no such persona."""
    deleted, _ = Persona.objects.filter(name=name).delete()
    if not deleted:
        raise InputError(f"no persona {name!r}")
