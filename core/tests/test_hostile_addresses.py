"""End to end: an archived page that points at the machine's own services gets none of them.

A hostile page on the (allowed) test site pulls images, a stylesheet and a script fetch from
127.0.0.2, [::1] and ``localhost`` on another port, as a page would aim at Redis or a cloud
metadata service. ``manage.py add --wait`` archives it with wget and the browser extractors,
the allowance narrowed to the test site's one port. The servers behind those addresses must
see no request at all, the snapshot must hold none of their bytes, and the results must list
each refusal with its reason (DESIGN.md §8).
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.tests.site import LiveSite
from orchestrator.tests.test_orchestrator import CRAWL_TIMEOUT, Vellum

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EXTRACTORS = "wget,screenshot,dom,singlefile"


class SecretServer:
    """A server on a private address that answers every GET with its ``marker`` and keeps
    each path it was asked for: the service a hostile page aims at."""

    def __init__(self, host: str, marker: bytes) -> None:
        self.marker = marker
        self.asked: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(server.marker)))
                self.end_headers()
                self.wfile.write(server.marker)

            def log_message(self, *args) -> None:
                pass

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.httpd = type("Server", (ThreadingHTTPServer,), {"address_family": family})(
            (host, 0), Handler
        )
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def secrets() -> Iterator[dict[str, SecretServer]]:
    servers = {
        "127.0.0.2": SecretServer("127.0.0.2", b"SECRET-OF-127-0-0-2"),
        "[::1]": SecretServer("::1", b"SECRET-OF-IPV6-LOOPBACK"),
        "localhost": SecretServer("127.0.0.1", b"SECRET-OF-LOCALHOST"),
    }
    yield servers
    for server in servers.values():
        server.stop()


def hostile_page(live_site: LiveSite, secrets: dict[str, SecretServer]) -> str:
    """Write the hostile page into the test site; return its URL."""
    at = {name: f"http://{name}:{server.port}" for name, server in secrets.items()}
    html = f"""<!doctype html><title>Hostile neighbour</title>
<link rel="stylesheet" href="{at["localhost"]}/style.css">
<p>A page that reaches for the archive's own machine.</p>
<img src="{at["127.0.0.2"]}/metadata.png">
<img src="{at["[::1]"]}/redis.png">
<img src="{at["localhost"]}/secret.png">
<script>fetch("{at["127.0.0.2"]}/from-script.json").catch(() => {{}});</script>
"""
    (live_site.root / "hostile-addresses.html").write_text(html)
    return live_site.url("/hostile-addresses.html")


def every_byte(folder: Path) -> Iterator[tuple[Path, bytes]]:
    """Yield each file of ``folder`` with its content, gzip and WACZ (zip) members unpacked."""
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".wacz":
            with zipfile.ZipFile(path) as wacz:
                for name in wacz.namelist():
                    member = wacz.read(name)
                    yield path / name, gzip.decompress(member) if name.endswith(".gz") else member
        yield path, gzip.decompress(data) if path.suffix == ".gz" else data


def test_a_hostile_page_gets_no_byte_of_private_addresses(
    live_site: LiveSite, secrets: dict[str, SecretServer], tmp_path: Path
) -> None:
    url = hostile_page(live_site, secrets)
    vellum = Vellum(
        tmp_path / "data",
        EXTRACTORS=EXTRACTORS,
        ALLOWED_PRIVATE_NETWORKS=f"127.0.0.1:{live_site.port}",  # the test site alone
    )
    assert vellum.manage("init").returncode == 0

    done = vellum.manage("add", "--wait", url, timeout=CRAWL_TIMEOUT)

    assert done.returncode == 0, done.stderr
    (row,) = vellum.list_json()
    assert row["status"] == "sealed"
    assert {name: server.asked for name, server in secrets.items()} == {
        "127.0.0.2": [],
        "[::1]": [],
        "localhost": [],
    }
    folder = vellum.data_dir / "archive" / row["id"]
    for path, data in every_byte(folder):
        for server in secrets.values():
            assert server.marker not in data, f"{path} holds {server.marker!r}"

    results = {
        r["extractor"]: r for r in json.loads((folder / "index.json").read_text())["results"]
    }
    assert {name: result["status"] for name, result in results.items()} == dict.fromkeys(
        EXTRACTORS.split(","), "succeeded"
    )
    images = [
        f"http://127.0.0.2:{secrets['127.0.0.2'].port}/metadata.png",
        f"http://[::1]:{secrets['[::1]'].port}/redis.png",
        f"http://localhost:{secrets['localhost'].port}/secret.png",
    ]
    # wget asks for every requisite, the browser for every subresource and script fetch: each
    # result lists the refusals of the page it captured.
    for name in EXTRACTORS.split(","):
        refused = results[name]["refused"]
        assert set(images) <= {line.split(": ", 1)[0] for line in refused}, name
        assert f"{images[0]}: 127.0.0.2 is a loopback address" in refused, name
        assert f"{images[1]}: ::1 is a loopback address" in refused, name
        assert any(line.startswith(f"{images[2]}: localhost: ") for line in refused), name
        if name != "wget":  # wget runs no script
            script = f"http://127.0.0.2:{secrets['127.0.0.2'].port}/from-script.json"
            assert f"{script}: 127.0.0.2 is a loopback address" in refused, name
