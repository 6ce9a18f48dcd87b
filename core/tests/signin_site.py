"""A test site on 127.0.0.1 that shows a marker only to a signed-in session (issue 21): a
request carrying the cookie ``session=<SESSION>`` gets the members' page, any other the
sign-in page."""

from __future__ import annotations

from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from archive.testing import LocalServer

SESSION = "s3cr3t-session-7f1c2a9e4b"  # the cookie's value, which no archived file may hold
MARKER = "MEMBERSONLY"
MEMBERS_PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Members</title>
<style>body {{ font: 48px/1.5 sans-serif; margin: 40px; background: #fff; }}</style>
</head><body><h1>{MARKER}</h1><p>Welcome back, reader.</p></body></html>
"""
SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head>
<body><h1>Please sign in</h1><form><input name="user"><input type="password"></form>
</body></html>
"""


class SignInHandler(BaseHTTPRequestHandler):
    """``/``: the members' page for the session cookie, else the sign-in page; 404 else."""

    def do_GET(self) -> None:
        cookies = self.headers.get("Cookie", "")
        signed_in = f"session={SESSION}" in [part.strip() for part in cookies.split(";")]
        if self.path.split("?")[0] != "/":
            body, status = b"<p>Not found</p>", HTTPStatus.NOT_FOUND
        else:
            body, status = (MEMBERS_PAGE if signed_in else SIGN_IN_PAGE).encode(), HTTPStatus.OK
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class SignInSite(LocalServer):
    def handler(self) -> type[BaseHTTPRequestHandler]:
        return SignInHandler


def cookies_txt() -> str:
    """A Netscape cookies.txt holding the session cookie for 127.0.0.1 (as a browser exports
    it, HttpOnly)."""
    return (
        "# Netscape HTTP Cookie File\n"
        f"#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\t{SESSION}\n"
    )
