"""What a persona gives the tools so that a site recognises a signed-in user (issue 21).

A ``Credentials`` holds cookies, extra request headers and a user agent, decrypted for one run.
The tools get them without a trace in any command line (which any local user may read in
``/proc/PID/cmdline``): files in a private temporary folder (mode 0700, each file 0600)
removed after the run (``persona_files``) hold the cookies as a Netscape ``cookies.txt`` (the
format of curl's ``--cookie``, wget's ``--load-cookies``, yt-dlp's ``--cookies``) and the
headers in each tool's own file: curl's ``--header @FILE``, a wgetrc of ``header`` lines for
wget's ``--config``, an options file for yt-dlp's ``--config-locations``. The browser gets a
Playwright storage state. ``secrets`` lists each value to scrub from what the tools write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import shlex
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from http.cookiejar import LoadError, MozillaCookieJar
from pathlib import Path
from urllib.parse import urlsplit

from crawls.seeds import domain_match

COOKIES_HEADER = "# Netscape HTTP Cookie File\n"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cookie:
    """One cookie (RFC 6265 §5.3): ``domain`` with a leading dot matches its subdomains too;
    ``expires`` is Unix seconds, or None for a session cookie."""

    name: str
    value: str
    domain: str
    path: str = "/"
    secure: bool = False
    http_only: bool = False
    expires: int | None = None


@dataclass
class Credentials:
    """Cookies, extra headers (``{name: value}``) and a user agent ("" for the default);
    ``keep_in_warcs``: leave the Cookie and Authorization headers sent in the WARCs' request
    records (default: they are replaced, core/extractors/scrubbing.py); ``header_domains``:
    the hosts and domains the headers are for (``for_url``)."""

    cookies: list[Cookie] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    user_agent: str = ""
    keep_in_warcs: bool = False
    header_domains: tuple[str, ...] = ()

    def for_url(self, url: str) -> Credentials:
        """These credentials for a capture of ``url``: the same, but without the headers when
        ``url``'s host domain-matches none of ``header_domains`` (``domain_match``), so that an
        Authorization meant for one site is not sent to every site a crawl visits. Cookies
        need no such care: each tool sends a cookie only to the hosts its domain matches."""
        host = urlsplit(url).hostname or ""
        if not self.headers or any(domain_match(host, d) for d in self.header_domains):
            return self
        return dataclasses.replace(self, headers={})

    @cached_property
    def fingerprint(self) -> str:
        """A SHA-256 of what these credentials send (hex), to tell a browser visit made with
        them from one made with others; computed once, however many captures ask."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def secrets(self) -> set[str]:
        """Every value that must not remain in a recorded file: cookie and header values."""
        return {c.value for c in self.cookies if c.value} | {v for v in self.headers.values() if v}

    def cookies_txt(self) -> str:
        """The cookies as a Netscape ``cookies.txt`` (tab-separated, one cookie a line), for
        the tools: no ``#HttpOnly_`` prefix (wget reads such a line as a comment; HttpOnly
        means nothing to a tool without scripts)."""
        lines = [COOKIES_HEADER]
        for c in self.cookies:
            lines.append(
                "\t".join(
                    [
                        c.domain,
                        "TRUE" if c.domain.startswith(".") else "FALSE",
                        c.path,
                        "TRUE" if c.secure else "FALSE",
                        str(c.expires or 0),
                        c.name,
                        c.value,
                    ]
                )
                + "\n"
            )
        return "".join(lines)

    def storage_state(self) -> dict:
        """The cookies as a Playwright storage state (``{"cookies": [...], "origins": []}``)."""
        return {
            "cookies": [
                {
                    "name": c.name,
                    "value": c.value,
                    "domain": c.domain,
                    "path": c.path,
                    "expires": c.expires if c.expires else -1,
                    "httpOnly": c.http_only,
                    "secure": c.secure,
                    "sameSite": "Lax",
                }
                for c in self.cookies
            ],
            "origins": [],
        }

    def to_json(self) -> str:
        """Serialise for the encrypted persona store (``from_json`` reads it back)."""
        return json.dumps(
            {
                "cookies": [c.__dict__ for c in self.cookies],
                "headers": self.headers,
                "user_agent": self.user_agent,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Credentials:
        """Read what ``to_json`` wrote."""
        data = json.loads(text)
        return cls(
            cookies=[Cookie(**c) for c in data.get("cookies", [])],
            headers=dict(data.get("headers", {})),
            user_agent=data.get("user_agent", ""),
        )


def parse_cookies_txt(text: str) -> list[Cookie]:
    """Parse a Netscape ``cookies.txt`` (as curl, wget and the browser extensions write it).

    ``#HttpOnly_`` lines are read too. Raises ValueError naming the problem when ``text`` is
    not such a file.
    """
    http_only = set()
    lines = []
    for line in text.splitlines():
        if line.startswith("#HttpOnly_"):
            line = line.removeprefix("#HttpOnly_")
            http_only.add(tuple(line.split("\t")[:1] + line.split("\t")[5:6]))
        lines.append(line)
    # MozillaCookieJar reads only a named file (its reader of an open stream, _really_load, is
    # private API): the text goes through a file in a private folder (0700), removed at once.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cookies.txt"
        body = "\n".join(lines)
        if not body.lstrip().startswith("# Netscape HTTP Cookie File"):
            body = COOKIES_HEADER + body
        path.write_text(body + "\n")
        jar = MozillaCookieJar(str(path))
        try:
            with warnings.catch_warnings():  # cookiejar warns of a bad line before raising
                warnings.simplefilter("ignore")
                jar.load(ignore_discard=True, ignore_expires=True)
        except LoadError as error:
            raise ValueError(f"not a Netscape cookies.txt file: {error}") from None
    return [
        Cookie(
            name=c.name,
            value=c.value or "",
            domain=c.domain,
            path=c.path or "/",
            secure=bool(c.secure),
            http_only=(c.domain, c.name) in http_only,
            expires=c.expires or None,  # 0: a session cookie
        )
        for c in jar
    ]


def parse_storage_state(text: str) -> list[Cookie]:
    """Parse the cookies of a Playwright storage state (JSON ``{"cookies": [...]}``).

    Raises ValueError naming the problem when ``text`` is not one.
    """
    try:
        data = json.loads(text)
        cookies = data["cookies"]
        return [
            Cookie(
                name=str(c["name"]),
                value=str(c["value"]),
                domain=str(c["domain"]),
                path=str(c.get("path") or "/"),
                secure=bool(c.get("secure")),
                http_only=bool(c.get("httpOnly")),
                expires=int(c["expires"]) if c.get("expires", -1) > 0 else None,
            )
            for c in cookies
        ]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a Playwright storage state: {error!r}") from None


def parse_cookies(text: str) -> list[Cookie]:
    """Parse ``text`` as a Playwright storage state when it is JSON, else as ``cookies.txt``."""
    return parse_storage_state(text) if text.lstrip().startswith("{") else parse_cookies_txt(text)


@dataclass(frozen=True)
class PersonaFiles:
    """A persona's secrets as files for one run, in ``folder`` (private, removed after): None
    for what the persona does not give.

    ``cookies``: a Netscape cookies.txt. ``headers``: "Name: value" a line (curl's
    ``--header @FILE``, curl 7.55 and later). ``wgetrc``: "header = Name: value" lines, read by
    wget's ``--config=FILE`` instead of /etc/wgetrc and ~/.wgetrc (GNU Wget manual, "Wgetrc
    Commands"). ``ytdlp_config``: one ``--add-headers`` option a line, read by yt-dlp's
    ``--config-locations FILE``.
    """

    folder: Path
    cookies: Path | None = None
    headers: Path | None = None
    wgetrc: Path | None = None
    ytdlp_config: Path | None = None


@contextlib.contextmanager
def persona_files(credentials: Credentials | None) -> Iterator[PersonaFiles | None]:
    """Yield ``credentials``' cookies and headers as ``PersonaFiles`` in a private folder (0700,
    each file 0600), removed on exit (``remove_private_folder``); None when they hold neither.

    Raises ValueError for a header name or value holding a line break or NUL (RFC 9110 §5.5
    forbids them; in a file they would add lines of their own).
    """
    if credentials is None or not (credentials.cookies or credentials.headers):
        yield None
        return
    headers = list(credentials.headers.items())
    for name, value in headers:
        if any(c in f"{name}{value}" for c in "\r\n\0"):
            raise ValueError(f"header {name!r} holds a line break or NUL")
    folder = Path(tempfile.mkdtemp(prefix="vellum-persona-"))  # mkdtemp makes it 0700
    try:
        yield PersonaFiles(
            folder=folder,
            cookies=_private_file(folder / "cookies.txt", credentials.cookies_txt())
            if credentials.cookies
            else None,
            **(_header_files(folder, headers) if headers else {}),
        )
    finally:
        remove_private_folder(folder)


def _header_files(folder: Path, headers: list[tuple[str, str]]) -> dict[str, Path]:
    """Write ``headers`` in each tool's format into ``folder``; return PersonaFiles' fields."""
    lines = [f"{name}: {value}" for name, value in headers]
    return {
        "headers": _private_file(folder / "headers.txt", "".join(f"{line}\n" for line in lines)),
        "wgetrc": _private_file(folder / "wgetrc", "".join(f"header = {line}\n" for line in lines)),
        "ytdlp_config": _private_file(
            folder / "yt-dlp.conf",
            "".join(f"--add-headers {shlex.quote(f'{n}:{v}')}\n" for n, v in headers),
        ),
    }


def _private_file(path: Path, text: str) -> Path:
    """Write ``text`` to a new file ``path`` made with mode 0600; return ``path``."""
    path.touch(mode=0o600)
    path.write_text(text)
    return path


@contextlib.contextmanager
def cookies_file(credentials: Credentials | None) -> Iterator[Path | None]:
    """Yield the cookies.txt of ``persona_files``; None when there are no cookies to give."""
    with persona_files(credentials) as files:
        yield files.cookies if files else None


def remove_private_folder(folder: Path) -> bool:
    """Remove ``folder`` (which holds secrets in plain text) and all in it; return whether it
    is gone. A failure is logged as a warning naming the folder, for an operator to remove by
    hand, and not raised: it must not hide the outcome of the tool that used it."""
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning(
            "persona secrets left on disk: cannot remove %s (%s); remove it by hand", folder, error
        )
        return False
    return True


# Each tool's option for a cookies.txt file, and for the file its headers are read from.
COOKIE_OPTIONS = {"curl": "--cookie", "wget": "--load-cookies", "yt-dlp": "--cookies"}


def persona_arguments(files: PersonaFiles | None, tool: str) -> list[str]:
    """Command-line options giving the persona's ``files`` to ``tool`` (``curl``, ``wget`` or
    ``yt-dlp``): its cookie option with the cookies file, and the option that reads the
    headers from a file (for wget, ``wget_config`` gives it), each option and its value as
    two arguments (curl takes no ``--option=value``). Paths only: no secret is on them."""
    if files is None:
        return []
    options = [COOKIE_OPTIONS[tool], str(files.cookies)] if files.cookies else []
    if tool == "curl" and files.headers:
        options += ["--header", f"@{files.headers}"]
    elif tool == "yt-dlp" and files.ytdlp_config:
        options += ["--config-locations", str(files.ytdlp_config)]
    return options


def wget_config(files: PersonaFiles | None) -> str:
    """wget's option for its startup file: ``--config=`` the persona's wgetrc (only ``header``
    lines) when it gives headers, else ``--no-config``. Either way neither /etc/wgetrc nor
    ~/.wgetrc is read, so none may turn the egress proxy off (``use_proxy``); both together
    would not do: wget reads no file at all after a ``--no-config`` that comes first."""
    if files is not None and files.wgetrc is not None:
        return f"--config={files.wgetrc}"
    return "--no-config"
