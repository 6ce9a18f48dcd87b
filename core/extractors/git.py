"""Mirror a git repository with ``git clone --mirror`` when the URL is one.

A URL is taken for a repository when its form says so (``looks_like_repository``: a path ending
in ``.git``, or owner/repo on a known forge), or when its ``info/refs`` answers as a git server
does (``probe``). Either way the repository is cloned over HTTP(S) only, without ever asking for
credentials, into ``<out_dir>/<name>.git``; git's messages go to ``git.log``.
"""

from __future__ import annotations

import re
import shutil
import signal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from core.extractors.base import Extractor, ExtractorOutput, HasURL, MainOutput
from core.extractors.credentials import Credentials, cookies_file
from core.extractors.errors import (
    Outcome,
    classify_http_status,
    egress_failure,
    too_large_reason,
)
from core.extractors.fetch import FetchResult, fetch
from core.extractors.html_page import output_from_fetch, remove, unavailable

LOG_NAME = "git.log"
PROBE_SECONDS = 10  # at most; less if the extractor's own timeout is shorter
PROBE_READ_BYTES = 64 * 1024  # enough ref lines to recognise a dumb server's info/refs
ADVERTISEMENT_TYPE = "application/x-git-upload-pack-advertisement"

# Hosts whose https://<host>/<owner>/<repo> is a repository's URL, and first path segments on
# them that name the site's own pages (github.com/features/actions is not a repository).
FORGE_HOSTS = frozenset({"github.com", "gitlab.com", "codeberg.org", "bitbucket.org"})
FORGE_RESERVED = frozenset(
    {
        "-", "about", "account", "apps", "collections", "dashboard", "enterprise", "explore",
        "features", "help", "login", "marketplace", "new", "notifications", "organizations",
        "orgs", "pricing", "product", "search", "settings", "signup", "sponsors", "topics",
        "trending", "user", "users",
    }
)  # fmt: skip
FORGE_PATH = re.compile(r"/[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+")

# gitprotocol-http(5), "Dumb Clients": info/refs holds one "<object id> HTAB <ref name> LF" per
# ref; object ids are 40 hex digits (SHA-1) or 64 (SHA-256).
REF_LINE = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\trefs/\S+")

# What git (LC_ALL=C) says when a clone fails, by cause. A file over the size limit kills the
# writing helper with SIGXFSZ, and git removes the half-made mirror before it exits 128.
TOO_LARGE_LOG = re.compile(rf"died of signal {signal.SIGXFSZ.value}\b|File too large")
AUTH_LOG = re.compile(
    r"Authentication failed|could not read (?:Username|Password)|terminal prompts disabled"
)
NOT_FOUND_LOG = re.compile(r"repository '[^']*' not found|info/refs not valid")
HTTP_STATUS_LOG = re.compile(r"returned error: (\d{3})|RPC failed; HTTP (\d{3})")
NETWORK_LOG = re.compile(
    r"Failed to connect|Could not resolve (?:host|proxy)|Connection (?:refused|reset|timed out)"
    r"|Operation timed out|Empty reply from server|RPC failed|early EOF|hung up unexpectedly"
    r"|transfer closed|Recv failure|SSL_ERROR_SYSCALL|GnuTLS recv error|unexpected disconnect"
)
EMPTY_LOG = "You appear to have cloned an empty repository."

# Never ask for credentials: no terminal prompt, and no askpass program (an empty GIT_ASKPASS
# also outranks core.askPass and SSH_ASKPASS, see git's prompt.c). Speak HTTP(S) only, so that
# a redirect or an option cannot make git read a local path or run a command (ext::). Read no
# system or user configuration (git-config(1), ENVIRONMENT): /etc/gitconfig or ~/.gitconfig
# could set http.proxy and take git around the egress proxy.
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "GIT_ALLOW_PROTOCOL": "http:https",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def repository_url(url: str) -> str | None:
    """Return ``url`` as git is given it: http(s), no query, fragment or trailing slash.

    Return None for any other scheme or a URL without a host.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        return None
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def looks_like_repository(url: str) -> bool:
    """Tell, without the network, whether an http(s) ``url`` names a git repository.

    True for a path ending in ``.git`` (``https://example.org/project.git``), and for exactly
    ``/<owner>/<repo>`` on a forge in ``FORGE_HOSTS`` (``https://github.com/psf/requests``),
    unless ``<owner>`` is one of the forge's own pages (``FORGE_RESERVED``).
    """
    clean = repository_url(url)
    if clean is None:
        return False
    parts = urlsplit(clean)
    if parts.path.endswith(".git"):
        return True
    host = (parts.hostname or "").removeprefix("www.")
    if host not in FORGE_HOSTS or not FORGE_PATH.fullmatch(parts.path):
        return False
    owner = parts.path.split("/")[1]
    return owner.lower() not in FORGE_RESERVED


def is_ref_advertisement(content_type: str, body: bytes) -> bool:
    """Tell whether a 200 answer to ``info/refs?service=git-upload-pack`` came from git.

    gitprotocol-http(5), "Smart Clients": a smart server answers with the content type
    ``application/x-git-upload-pack-advertisement``; any other type means a dumb server, whose
    reply is the plain ``info/refs`` file (clients "SHOULD use the response already in hand"
    rather than ask again). ``body`` is the start of that reply: it must hold at least one ref
    line, and every complete line must be one (``REF_LINE``). ``content_type`` is the media
    type, lowercased, without parameters.
    """
    if content_type == ADVERTISEMENT_TYPE:
        return True
    text = body.decode("utf-8", "replace")
    lines = text.split("\n")
    if len(body) >= PROBE_READ_BYTES:
        lines = lines[:-1]  # the last line may be cut short
    lines = [line for line in lines if line]
    return bool(lines) and all(REF_LINE.fullmatch(line) for line in lines)


def persona_config(credentials: Credentials | None, cookies: Path | None) -> dict[str, str]:
    """git configuration, as environment variables (git-config(1) GIT_CONFIG_COUNT), giving
    git over HTTP the persona's ``cookies`` file (``http.cookieFile``) and headers
    (``http.extraHeader``): nothing of them is on the command line. ``{}`` without one."""
    if credentials is None:
        return {}
    config = [("http.cookieFile", str(cookies))] if cookies else []
    config += [
        ("http.extraHeader", f"{name}: {value}") for name, value in credentials.headers.items()
    ]
    env = {"GIT_CONFIG_COUNT": str(len(config))}
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def probe(
    url: str,
    *,
    out_dir: Path,
    timeout: float,
    user_agent: str,
    credentials: Credentials | None = None,
) -> tuple[FetchResult, bool]:
    """GET ``<url>/info/refs?service=git-upload-pack`` as git's own ref discovery does.

    ``url`` is a ``repository_url``; ``timeout`` is in seconds. Return the fetch and whether
    the answer came from a git server, smart or dumb (``is_ref_advertisement``). The body is a
    temporary file in ``out_dir``, deleted before returning; curl's log stays in
    ``out_dir/curl.log``. Raises LookupError if curl is not installed.
    """
    result, start = read_info_refs(
        url, out_dir=out_dir, timeout=timeout, user_agent=user_agent, credentials=credentials
    )
    found = result.outcome is Outcome.SUCCEEDED and is_ref_advertisement(result.content_type, start)
    return result, found


def read_info_refs(
    url: str,
    *,
    out_dir: Path,
    timeout: float,
    user_agent: str,
    credentials: Credentials | None = None,
) -> tuple[FetchResult, bytes]:
    """Fetch ``<url>/info/refs?service=git-upload-pack`` as ``probe`` does; return the fetch
    and the first PROBE_READ_BYTES of its body (b"" unless it succeeded)."""
    body_path = out_dir / ".git-probe"
    try:
        result = fetch(
            f"{url}/info/refs?service=git-upload-pack",
            body_path=body_path,
            headers_path=None,
            log_path=out_dir / "curl.log",
            timeout=timeout,
            user_agent=user_agent,
            credentials=credentials,
        )
        if result.outcome is not Outcome.SUCCEEDED:
            return result, b""
        try:
            with open(body_path, "rb") as stream:
                return result, stream.read(PROBE_READ_BYTES)
        except FileNotFoundError:
            return result, b""  # curl writes no file for an empty body
    finally:
        remove(body_path)


def mirror_name(url: str) -> str:
    """Return the mirror's folder name: the repository's last path segment, with ``.git``.

    Characters other than ASCII letters, digits, ``.``, ``_`` and ``-`` become ``_``; a name
    that would be empty or hidden becomes ``repository.git``.
    """
    last = urlsplit(url).path.rstrip("/").rpartition("/")[2].removesuffix(".git")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", last).lstrip(".")
    return f"{name or 'repository'}.git"


def classify_git_failure(exit_code: int | None, log: str, url: str) -> tuple[Outcome, str]:
    """Classify a failed ``git clone`` by what it logged (in the C locale).

    Credentials asked for, or no repository there: fatal (forges answer 401 for a repository
    that does not exist as for a private one). An HTTP error status: as that status
    (errors.classify_http_status). Network trouble: temporary. Anything else: fatal, quoting
    git's last ``fatal:`` or ``error:`` line.
    """
    if AUTH_LOG.search(log):
        return Outcome.FATAL, f"git: {url} asks for credentials (private or missing repository)"
    if NOT_FOUND_LOG.search(log):
        return Outcome.FATAL, f"git: no repository at {url}"
    if status := HTTP_STATUS_LOG.search(log):
        code = int(status[1] or status[2])
        return classify_http_status(code), f"git: HTTP {code} from {url}"
    message = _last_message(log)
    if NETWORK_LOG.search(log):
        return Outcome.TEMPORARY, f"git: network error: {message}"
    return Outcome.FATAL, f"git clone failed (exit {exit_code}): {message}"


def _last_message(log: str) -> str:
    """Return git's last ``fatal:``/``error:`` message, without its prefix (at most 300 chars)."""
    for line in reversed(log.splitlines()):
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)[:300]
    return f"see {LOG_NAME}"


class GitExtractor(Extractor):
    """Mirror a git repository (every ref) with ``git clone --mirror`` over HTTP(S)."""

    name = "git"
    binaries = ("git",)
    main_output = MainOutput.DIRECTORY  # the mirror; its files are git's own, not checked

    def should_run(self, snapshot: HasURL) -> tuple[bool, str]:
        """Run on any http(s) URL with git installed; ``run`` finds out whether it is a
        repository, since that may take a request."""
        runs, reason = super().should_run(snapshot)
        if runs and repository_url(snapshot.url) is None:
            return False, "not an http(s) URL"
        return runs, reason

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Clone ``snapshot.url`` into ``out_dir/<name>.git``; output is that folder's name.

        A URL that ``looks_like_repository`` is cloned at once; any other is probed first
        (``probe``, at most PROBE_SECONDS) and SKIPPED if no git server answers. A probe that
        fails for the network or a temporary HTTP status keeps curl's outcome. What git writes
        is bounded by ``download_limit``: no file (a pack) over MAX_DOWNLOAD_BYTES, twice that
        in all (the pack's index, or a dumb server's loose objects).
        """
        url = repository_url(snapshot.url)
        if url is None:
            return ExtractorOutput(outcome=Outcome.SKIPPED, error="not an http(s) URL")
        try:
            git = self.binary_path("git")
        except LookupError as error:
            return unavailable(error)
        if not looks_like_repository(url):
            try:
                result, found = probe(url, out_dir=out_dir, **self._check_options())
            except LookupError as error:
                return unavailable(error)
            if not found:
                return _not_a_repository(result)
        return self._clone(git, url, out_dir)

    def _check_options(self) -> dict:
        """Keyword arguments for a curl check of info/refs: short (at most PROBE_SECONDS), with
        this extractor's user agent and the persona's credentials; its ``arguments`` are git's,
        not curl's."""
        return {
            "timeout": min(PROBE_SECONDS, self.timeout),
            "user_agent": self.user_agent,
            "credentials": self.credentials,
        }

    def command(self, git: str, url: str, mirror: str) -> list[str]:
        """Return the ``git clone --mirror`` command line for ``url`` into ``mirror``."""
        return [
            git,
            "-c", f"http.userAgent={self.user_agent}",
            "clone",
            "--mirror",
            *self.arguments,
            "--",
            url,
            mirror,
        ]  # fmt: skip

    def _clone(self, git: str, url: str, out_dir: Path) -> ExtractorOutput:
        """Run the clone and classify how it ended."""
        mirror = mirror_name(url)
        cmd = self.command(git, url, mirror)
        with cookies_file(self.credentials) as cookies:
            env = {**GIT_ENV, **persona_config(self.credentials, cookies)}
            done, output = self.run_tool("git", cmd, out_dir, log_name=LOG_NAME, env=env)
        if output.outcome is not Outcome.SUCCEEDED:  # timed out, or wrote too much
            _remove_half_made(out_dir / mirror)
            return output
        log = (out_dir / LOG_NAME).read_text(encoding="utf-8", errors="replace")
        if TOO_LARGE_LOG.search(log):
            _remove_half_made(out_dir / mirror)
            output.outcome, output.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)
        elif done.exit_code != 0:
            # What the egress proxy met (a refusal, a host that did not answer) is why, not
            # the 403 or 502 it answered git with.
            failure = egress_failure(done.refusals, done.unreachable)
            output.outcome, output.error = failure or classify_git_failure(done.exit_code, log, url)
        elif EMPTY_LOG in log:
            return self._empty(output, url, out_dir)
        elif not (out_dir / mirror / "HEAD").is_file():
            output.outcome, output.error = Outcome.FATAL, f"git left no repository, see {LOG_NAME}"
        else:
            output.output = mirror
        return output

    def _empty(self, cloned: ExtractorOutput, url: str, out_dir: Path) -> ExtractorOutput:
        """Describe a clone that git took for an empty repository.

        git reads any page at ``<url>/info/refs`` that is no ref list (a web page, an error
        page served with 200) as an empty dumb repository: its info/refs is checked with curl
        (at most PROBE_SECONDS), and only an empty one or a ref advertisement is an empty
        repository. A check that fails keeps curl's outcome.
        """
        try:
            result, start = read_info_refs(url, out_dir=out_dir, **self._check_options())
        except LookupError as error:
            return unavailable(error)
        if result.outcome is not Outcome.SUCCEEDED:
            return output_from_fetch(result)
        if start.strip() and not is_ref_advertisement(result.content_type, start):
            return output_from_fetch(
                result, Outcome.SKIPPED, "not a git repository (info/refs is not a ref list)"
            )
        cloned.outcome, cloned.error = Outcome.SKIPPED, f"git: {url} is an empty repository"
        return cloned


def _remove_half_made(mirror: Path) -> None:
    """Delete what a clone that failed left of ``mirror``: git removes it itself when a clone
    fails, but not when it is killed (its timeout, or the byte limit's watcher)."""
    shutil.rmtree(mirror, ignore_errors=True)


def _not_a_repository(result: FetchResult) -> ExtractorOutput:
    """Describe a probe that found no git server.

    No full answer (curl failed, timed out or stopped) or a temporary HTTP status: curl's
    outcome, since the server may be a git server that is down. Any other answer: SKIPPED.
    """
    if result.exit_code != 0 or result.http_status is None or result.outcome is Outcome.TEMPORARY:
        return output_from_fetch(result)
    if result.outcome is Outcome.SUCCEEDED:
        reason = "not a git repository (info/refs is not a ref list)"
    else:
        reason = f"not a git repository (no info/refs: HTTP {result.http_status})"
    return output_from_fetch(result, Outcome.SKIPPED, reason)
