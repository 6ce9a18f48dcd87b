"""Keep credentials given to the tools out of the commands Vellum records (DESIGN.md §8).

EXTRACTOR_OPTIONS ``arguments`` may carry secrets: ``--header=Authorization: Bearer …``,
``--http-password=…``, ``curl -u user:pass``, ``https://user:pass@host/``. Whatever Vellum keeps
of a command (the ArchiveResult's ``cmd`` and ``history``, ``index.json``, the admin, the
``$ …`` line of a log) goes through ``redact_command``. What the tools themselves write (logs,
WARCs) is rewritten after the run by scrubbing.py, with the values ``redact`` found.

The command line is read as each tool reads it (cmdline.py: abbreviated long options such as
wget's ``--http-pass=``, clustered short options such as curl's ``-sH …`` or ``-su user:pass``,
wget's ``-e``/``--execute`` wgetrc commands). What counts as a secret:

- the value of every header given on the command line (``--header``, curl's ``-H`` and
  ``--proxy-header``, yt-dlp's ``--add-header(s)``, wget's ``-e header=…``, git's
  ``-c http.extraHeader=``): the name stays. User-Agent is no credential (RFC 9110 §10.1.5:
  every server it is sent to sees it) and stays too;
- the value of an option that carries a credential (``--password``, ``--http-password``,
  ``--ftp-password``, ``--proxy-password``, ``--cookie``, ``--oauth2-bearer``, ``--netrc-file``,
  curl's ``--cert``, the wgetrc commands ``password``, ``http_password``…, any
  ``--…password…=``/``--…token…=``/``--…secret…=``, any git config key naming one), and the
  password of ``--user``/``--proxy-user``/curl's ``-u`` (or the wgetrc ``user`` commands);
- the userinfo (``user:pass@``, or a token as user name) of any URL.

Each is shown as ``REDACTED``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.extractors.cmdline import (
    COMMAND,
    CONFIG,
    HEADER,
    SECRET,
    SECRET_NAME,
    USER,
    WGETRC_KINDS,
    find_options,
    wgetrc_command,
)

REDACTED = "…redacted…"
# Headers whose value is no credential, compared without case.
PUBLIC_HEADERS = frozenset({"user-agent"})
# The userinfo of a URL (RFC 3986 §3.2.1), whether "user:password" or a token as the user.
URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s\"'<>]+@")


@dataclass
class Redaction:
    """A command as it may be recorded, with what was taken out of it.

    ``cmd`` is the recorded form; ``secrets`` holds each hidden value (for finding it again in
    logs) and ``headers`` the names of the headers whose values were hidden.
    """

    cmd: list[str] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    headers: set[str] = field(default_factory=set)


def redact_command(cmd: Sequence[str]) -> list[str]:
    """Return ``cmd`` (a list of arguments, the binary first) as it may be recorded.

    Idempotent: a recorded command passes through unchanged. See the module docstring for
    what is hidden.
    """
    return redact(cmd).cmd


def redact(cmd: Sequence[str], *, tool: str | None = None) -> Redaction:
    """Redact ``cmd``; ``tool`` names the program when ``cmd`` holds only arguments (else
    ``cmd[0]``'s file name does). Returns the recorded form and what was hidden."""
    args = [str(arg) for arg in cmd]
    found = Redaction(cmd=list(args))
    program = tool or (os.path.basename(args[0]) if args else None)
    for option in find_options(args, program):
        if option.value is not None:
            kept = found.cmd[option.index][: option.start]
            found.cmd[option.index] = kept + _redact_value(option.kind, option.value, found)
    found.cmd = [_redact_urls(arg, found) for arg in found.cmd]
    return found


def _redact_value(kind: str, value: str, found: Redaction) -> str:
    """Redact an option's value by what it holds (a cmdline kind); note what was hidden in
    ``found``. A value that sets the proxy keeps all but its URL's userinfo."""
    if kind == HEADER:
        return _redact_header(value, found)
    if kind == USER:
        user, colon, password = value.partition(":")
        if not colon or password in ("", REDACTED):
            return _redact_urls(value, found)
        _note(found, password)
        return f"{user}:{REDACTED}"
    if kind == CONFIG:  # git -c key=value: an extra header, or a key that names a secret
        key, equals, setting = value.partition("=")
        if equals and key.lower().endswith("extraheader"):
            return f"{key}={_redact_header(setting, found)}"
        if equals and SECRET_NAME.search(key):
            return f"{key}={_redact_value(SECRET, setting, found)}"
        return _redact_urls(value, found)
    if kind == COMMAND:  # wget -e "name = value"
        written, name, setting = wgetrc_command(value)
        command_kind = WGETRC_KINDS.get(name) or (SECRET if SECRET_NAME.search(name) else "")
        if command_kind in (HEADER, USER, SECRET) and written != value:
            return written + _redact_value(command_kind, setting, found)
        return _redact_urls(value, found)
    if kind != SECRET:  # PROXY: a URL, whose userinfo is all it may hide
        return _redact_urls(value, found)
    if value != REDACTED:
        _note(found, value)
    return REDACTED


def _redact_header(value: str, found: Redaction) -> str:
    """Redact "Name: value" to "Name: REDACTED"; a value without a colon (curl's ``@file``)
    stays, as does an empty header ("Name;" or "Name:", which removes it) and one of
    PUBLIC_HEADERS."""
    name, colon, content = value.partition(":")
    content = content.strip()
    if not colon or not content or content == REDACTED:
        return value
    if name.strip().lower() in PUBLIC_HEADERS:
        return _redact_urls(value, found)
    found.headers.add(name.strip())
    _note(found, content)
    return f"{name}: {REDACTED}"


def _redact_urls(text: str, found: Redaction) -> str:
    """Replace the userinfo of every URL in ``text``, noting each one."""

    def replace(match: re.Match) -> str:
        userinfo = match.group(0)[len(match["scheme"]) : -1]
        if userinfo != REDACTED:
            _note(found, userinfo)
        return f"{match['scheme']}{REDACTED}@"

    return URL_USERINFO.sub(replace, text)


def _note(found: Redaction, secret: str) -> None:
    """Remember ``secret``, and its credential alone when it has a scheme ("Bearer x" -> x)."""
    found.secrets.add(secret)
    found.secrets.update(secret.split()[-1:])
    if ":" in secret and "://" not in secret:  # user:password
        found.secrets.add(secret.split(":", 1)[1])
