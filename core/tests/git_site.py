"""Bare git repositories served on 127.0.0.1 by a real HTTP server, for the git extractor.

``GitSite`` serves a folder of bare repositories as a static web server does (git's dumb HTTP
protocol, after ``git update-server-info``) and, under /smart/, through ``git http-backend``
(the smart protocol, as forges speak it). Every request's method, path and User-Agent is kept.
"""

from __future__ import annotations

import os
import subprocess
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from archive.testing import LocalServer

README = "Hello from the Vellum git test.\nSecond line.\n"
STALL_SECONDS = 30  # longer than any timeout here; released when the server stops


def git(*args: str | Path, cwd: Path | None = None) -> str:
    """Run git with a fixed identity; return its stdout (raise if it fails)."""
    identity = ["-c", "user.name=Vellum Test", "-c", "user.email=test@vellum.invalid"]
    done = subprocess.run(
        ["git", *identity, "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def serve_bare(source: Path, target: Path) -> None:
    """Make ``target`` a bare clone of ``source`` that a static web server can serve."""
    git("clone", "--quiet", "--bare", source, target)
    git("update-server-info", cwd=target)


def build_repositories(root: Path, work: Path) -> None:
    """Write the served repositories under ``root``, from working trees made in ``work``.

    project.git and project (no suffix): main with README.md, a branch ``other`` and a tag
    ``v1.0``. empty.git: no commits. big.git: 300 KB of random bytes in one commit.
    lookalike/info/refs: an HTML page where a ref list would be.
    """
    source = work / "source"
    git("init", "--quiet", "-b", "main", source)
    (source / "README.md").write_text(README, encoding="utf-8")
    git("add", "README.md", cwd=source)
    git("commit", "--quiet", "-m", "First commit", cwd=source)
    git("branch", "other", cwd=source)
    git("tag", "-a", "v1.0", "-m", "Version 1.0", cwd=source)
    serve_bare(source, root / "project.git")
    serve_bare(source, root / "project")

    git("init", "--quiet", "--bare", root / "empty.git")
    git("update-server-info", cwd=root / "empty.git")

    big = work / "big"
    git("init", "--quiet", "-b", "main", big)
    (big / "noise.bin").write_bytes(os.urandom(300_000))  # random: git cannot compress it
    git("add", "noise.bin", cwd=big)
    git("commit", "--quiet", "-m", "Noise", cwd=big)
    serve_bare(big, root / "big.git")

    (root / "lookalike" / "info").mkdir(parents=True)
    (root / "lookalike" / "info" / "refs").write_text("<!doctype html><title>Hi</title>\n")


class GitHandler(SimpleHTTPRequestHandler):
    """Serve the repositories' files; /smart/ through git http-backend; two special paths."""

    site: GitSite

    def do_GET(self) -> None:
        self.dispatch()

    def do_POST(self) -> None:
        self.dispatch()

    def dispatch(self) -> None:
        self.site.requests.append((self.command, self.path, self.headers.get("User-Agent", "")))
        if self.path.startswith("/smart/"):
            self.http_backend()
        elif self.path.startswith("/private.git/"):
            self.send_response(HTTPStatus.UNAUTHORIZED)
            self.send_header("WWW-Authenticate", 'Basic realm="private"')
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/busy/"):
            self.send_response(HTTPStatus.SERVICE_UNAVAILABLE)
            self.send_header("Retry-After", "120")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/stall.git/"):
            self.site.release.wait(STALL_SECONDS)
        elif self.command == "GET":
            super().do_GET()
        else:
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED)

    def http_backend(self) -> None:
        """Answer as a smart git server: run git http-backend as a CGI program."""
        path, _, query = self.path.removeprefix("/smart").partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "GIT_PROJECT_ROOT": self.directory,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_ADDR": self.client_address[0],
        }
        cgi = subprocess.run(
            ["git", "http-backend"], input=self.rfile.read(length), env=env, capture_output=True
        )
        head, _, body = cgi.stdout.partition(b"\r\n\r\n")
        fields = [line.split(": ", 1) for line in head.decode("latin-1").split("\r\n") if line]
        status = next((int(value.split()[0]) for name, value in fields if name == "Status"), 200)
        self.send_response(status)
        for name, value in fields:
            if name != "Status":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class GitSite(LocalServer):
    """Bare repositories served on 127.0.0.1; ``requests`` lists (method, path, User-Agent)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[tuple[str, str, str]] = []
        super().__init__()

    def handler(self):
        bound = type("BoundGitHandler", (GitHandler,), {"site": self})
        return partial(bound, directory=str(self.root))
