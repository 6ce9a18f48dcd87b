"""What a persona gives the tools so that a site recognises a signed-in user (issue 21).

A ``Credentials`` holds cookies, extra request headers and a user agent, decrypted for one run.
The tools get them without a trace in any command line Vellum records: cookies as a Netscape
``cookies.txt`` file (the format of curl's ``--cookie``, wget's ``--load-cookies``, yt-dlp's
``--cookies``) in a private temporary folder (mode 0700) removed after the run, and the browser
as a Playwright storage state. ``secrets`` lists each value to scrub from what the tools write.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.cookiejar import LoadError, MozillaCookieJar
from pathlib import Path

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
    records (default: they are replaced, core/extractors/scrubbing.py)."""

    cookies: list[Cookie] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    user_agent: str = ""
    keep_in_warcs: bool = False

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


@contextlib.contextmanager
def cookies_file(credentials: Credentials | None) -> Iterator[Path | None]:
    """Yield a ``cookies.txt`` of ``credentials`` in a private folder (0700, the file 0600),
    removed on exit; None when there are no cookies to give."""
    if credentials is None or not credentials.cookies:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="vellum-persona-"))  # mkdtemp makes it 0700
    try:
        path = folder / "cookies.txt"
        path.touch(mode=0o600)
        path.write_text(credentials.cookies_txt())
        yield path
    finally:
        remove_private_folder(folder)


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


def persona_arguments(
    credentials: Credentials | None,
    cookies: Path | None,
    cookie_option: str,
    header_option: str = "--header",
) -> list[str]:
    """Command-line options giving ``credentials`` to curl, wget or yt-dlp: ``cookie_option``
    with the ``cookies`` file, and ``header_option`` with ``Name: value`` per extra header,
    each option and its value as two arguments (curl takes no ``--option=value``). Header
    values are hidden when the command is recorded (core/extractors/redaction.py)."""
    if credentials is None:
        return []
    options = [cookie_option, str(cookies)] if cookies else []
    for name, value in credentials.headers.items():
        options += [header_option, f"{name}: {value}"]
    return options
