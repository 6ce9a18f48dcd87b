"""What several apps' tests share: a local HTTP server base, and the test database's URL for the
orchestrator and command subprocesses a test starts."""

from __future__ import annotations

import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

from django.db import connection


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 (a free port), served from a daemon thread.

    Subclasses return their handler class from ``handler()``; it may refer to the server object
    (``self``). ``release`` is set by ``stop()`` so that handlers that wait (slow pages) give up.
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError(f"{type(self).__name__} must return its handler class")

    def url(self, path: str = "/") -> str:
        """Return ``http://127.0.0.1:<port><path>`` (a missing leading slash is added)."""
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self):
        """Start serving; return self."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Release every waiting handler, stop serving and close the socket."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def postgres_problem(**params) -> str | None:
    """Connect to PostgreSQL with psycopg's ``params`` (``conninfo=`` a URL, or host, port,
    user...); return the first line of the error, or None when the server answers."""
    import psycopg

    try:
        psycopg.connect(connect_timeout=3, **params).close()
    except psycopg.Error as error:
        return str(error).splitlines()[0]
    return None


def shared_database_url() -> str:
    """Return the URL of the database this test process uses (the test database, not the
    configured one), for a subprocess's DATABASE_URL so that it shares it."""
    return database_url(connection.vendor, connection.settings_dict)


def database_url(vendor: str, db: dict) -> str:
    """Return a DATABASE_URL that dj-database-url parses back into ``db``'s NAME, USER,
    PASSWORD, HOST and PORT (a Django ``DATABASES`` entry of ``vendor``: "sqlite" or
    "postgresql"). A HOST that is a Unix socket's folder (``/var/run/postgresql``) is
    percent-encoded in the host's place, as dj-database-url reads it; an IPv6 address is
    bracketed (RFC 3986 §3.2.2); a user, password or name is percent-encoded (§2.1)."""
    if vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "", safe="")
    password = quote(db.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or ""
    if host.startswith("/"):
        host = quote(host, safe="")
    elif ":" in host:
        host = f"[{host}]"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{quote(db['NAME'], safe='')}"


# --- processes, read from /proc (Linux) ----------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    """Return the pids whose parent is ``pid``."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after ")".
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            children.append(int(entry.name))
    return children


def process_cmdline(pid: int) -> list[str]:
    """Return the command line of ``pid`` ([] once it is gone)."""
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (dead but not yet reaped)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def chromium_pids(data_dir: Path | str | None = None) -> set[int]:
    """Return the running (not zombie) processes of Debian's Chromium: the browser and every
    helper it forks (zygote, renderers, GPU and utility processes), whatever they are called.

    With ``data_dir``, only those of Vellum's browsers for that DATA_DIR: every one of them
    names its profile folder, ``DATA_DIR/tmp/chromium-*``, on its command line. Test runs side
    by side then do not count each other's browsers.
    """
    profile = f"--user-data-dir={Path(data_dir) / 'tmp'}/chromium-" if data_dir else ""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            exe = os.readlink(entry / "exe")
        except OSError:
            continue
        if "chromium" not in Path(exe).name or not is_running(int(entry.name)):
            continue
        # Chromium's helpers rewrite their argv into one string: search the whole line.
        if profile in " ".join(process_cmdline(int(entry.name))):
            pids.add(int(entry.name))
    return pids


# --- small helpers for extractor tests -----------------------------------------------------------


def wait_until(condition, seconds: float = 10) -> bool:
    """Return True once ``condition()`` holds, checking every 0.1 s for up to ``seconds``;
    then return what it says one last time (a process that takes a moment to exit)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def unused_port() -> int:
    """Return a local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def files_in(folder: Path) -> set[str]:
    """Return every file under ``folder``, as POSIX paths relative to it."""
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


# --- an S3 server for storage-target tests -------------------------------------------------------


class MotoS3Server:
    """moto's S3 server on 127.0.0.1 (a free port), served from a daemon thread.

    ``stop()`` closes the port (clients get "connection refused"); ``start()`` again serves on the
    same port with the same buckets (moto keeps its state per process): an outage and its
    recovery. Bucket names are per test (``create_bucket()``), as every server in a process
    shares that state.
    """

    access_key = "testing"
    secret_key = "testing"
    region = "us-east-1"

    def __init__(self) -> None:
        self.port = unused_port()
        self._server = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoS3Server:
        """Serve (again) on ``self.port``; return self."""
        import logging

        from moto.server import ThreadedMotoServer

        # werkzeug logs every request at INFO to a handler of its own: one line per S3 call.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (werkzeug closes it when serve_forever returns)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client(self):
        """Return a boto3 S3 client for this server."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(connect_timeout=5, retries={"max_attempts": 1}),
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create the bucket ``name`` (default: a fresh ``vellum-<hex>``); return its name."""
        import uuid

        name = name or f"vellum-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def storage_entry(self, bucket: str, **options) -> dict:
        """Return the STORAGES (and STORAGE_TARGETS) entry of an S3Storage on ``bucket`` here;
        ``options`` add to or replace its OPTIONS."""
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": self.endpoint_url,
                "access_key": self.access_key,
                "secret_key": self.secret_key,
                "region_name": self.region,
                **options,
            },
        }


def artifact_path(name: str) -> Path:
    """Return where a test saves ``name`` (a screenshot) for people to look at after the run:
    ``$VELLUM_TEST_ARTIFACTS`` or ``test-artifacts/`` in the checkout (git ignores it)."""
    root = Path(
        os.environ.get("VELLUM_TEST_ARTIFACTS") or Path(__file__).parent.parent / "test-artifacts"
    )
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
