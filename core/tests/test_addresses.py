"""The address policy (core/extractors/addresses.py) and the egress proxy that applies it to
every tool (core/extractors/egress.py), with real curl and wget against servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from ipaddress import ip_address, ip_network
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.urls import reverse
from model_bakery import baker

from archive.env import env_networks
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.addresses import AddressRefused, refusal_reason, resolve_allowed
from core.extractors.egress import BadRequest, EgressProxy, RequestHead, parse_request_head
from core.extractors.process import find_binary, run_command
from core.models import ArchiveResult, Snapshot
from core.tests.site import LiveSite


def only(port: int | None, network: str = "127.0.0.1/32"):
    """Settings that open one network (one port of it, unless ``port`` is None)."""
    return override_settings(ALLOWED_PRIVATE_NETWORKS=[(ip_network(network), port)])


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.0.0.2", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fd12:3456::1", "unique-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("100.64.0.1", "reserved"),
        # IPv6 forms that carry an IPv4 address are judged by it.
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.1.2.3", "private"),
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("::a00:1", "private"),  # IPv4-compatible 10.0.0.1
        ("fec0::1", "reserved"),  # site-local, deprecated
        ("64:ff9b:1::a9fe:a9fe", "reserved"),  # local-use NAT64
        ("::ffff:0:7f00:1", "reserved"),  # IPv4-translated 127.0.0.1
    ],
)
def test_non_global_addresses_are_refused_with_their_kind(address: str, kind: str) -> None:
    with override_settings(ALLOWED_PRIVATE_NETWORKS=[]):
        reason = refusal_reason(address, 80)

    assert reason is not None
    assert reason.startswith(str(ip_address(address)))
    assert reason.endswith(f" is {'an' if kind == 'unspecified' else 'a'} {kind} address")


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"])
def test_global_unicast_addresses_pass(address: str) -> None:
    with override_settings(ALLOWED_PRIVATE_NETWORKS=[]):
        assert refusal_reason(address, 443) is None


def test_allowed_networks_open_a_network_or_one_port_of_it() -> None:
    with only(8000):
        assert refusal_reason("127.0.0.1", 8000) is None
        assert refusal_reason("::ffff:127.0.0.1", 8000) is None  # the same address, mapped
        assert refusal_reason("127.0.0.1", 6379) is not None
        assert refusal_reason("127.0.0.2", 8000) is not None
    with only(None, "10.0.0.0/8"):
        assert refusal_reason("10.20.30.40", 1) is None
        assert refusal_reason("192.168.0.1", 1) is not None


def test_allowed_networks_setting_reads_cidrs_and_ports(monkeypatch) -> None:
    monkeypatch.setenv("NETS", "10.0.0.0/8, 127.0.0.1:8000, [::1]/128:80, fd00::/8")

    assert env_networks("NETS", []) == [
        (ip_network("10.0.0.0/8"), None),
        (ip_network("127.0.0.1/32"), 8000),
        (ip_network("::1/128"), 80),
        (ip_network("fd00::/8"), None),
    ]
    for bad in ("10.0.0.0/33", "127.0.0.1:99999", "localhost"):
        monkeypatch.setenv("NETS", bad)
        with pytest.raises(ImproperlyConfigured, match="NETS"):
            env_networks("NETS", [])


def test_a_name_is_checked_after_it_resolves() -> None:
    # localhost resolves to ::1 and 127.0.0.1: only an opened address is ever connected to.
    with only(None):
        assert resolve_allowed("localhost", 80) == [(socket.AF_INET, "127.0.0.1")]
        with pytest.raises(AddressRefused, match=r"^::1 is a loopback address$"):
            resolve_allowed("[::1]", 80)
    refused = pytest.raises(AddressRefused, match=r"^localhost: (::1|127\.0\.0\.1) is a loopback")
    with override_settings(ALLOWED_PRIVATE_NETWORKS=[]), refused:
        resolve_allowed("localhost", 80)


def curl(proxy: EgressProxy, url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", url],
        env={**os.environ, **proxy.environment()},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_proxy_passes_what_the_policy_allows_and_refuses_the_rest(
    live_site: LiveSite, bare_site: LiveSite
) -> None:
    allowed = live_site.url("/page2.html")
    other_port = bare_site.url("/page2.html")
    with only(live_site.port), EgressProxy() as proxy:
        good = curl(proxy, allowed)
        by_name = curl(proxy, allowed.replace("127.0.0.1", "localhost"))
        refused = curl(proxy, other_port)
        v6 = curl(proxy, f"http://[::1]:{live_site.port}/page2.html")
        tunnel = curl(proxy, f"https://127.0.0.2:{live_site.port}/")

    assert good.stdout.endswith("\n200")
    assert by_name.stdout.endswith("\n200")
    assert refused.stdout.endswith("\n403")
    assert "Refused by the address policy" in refused.stdout
    assert v6.stdout.endswith("\n403")
    assert "CONNECT tunnel failed, response 403" in tunnel.stderr
    assert [str(refusal).split(": ", 1)[0] for refusal in proxy.refusals] == [
        other_port,
        f"http://[::1]:{live_site.port}/page2.html",
        f"127.0.0.2:{live_site.port}",
    ]


def test_every_redirect_hop_is_checked(live_site: LiveSite, bare_site: LiveSite) -> None:
    # The live site redirects to any URL it is given; the hop goes to a port not opened.
    target = bare_site.url("/page2.html")
    with only(live_site.port), EgressProxy() as proxy:
        result = subprocess.run(
            ["curl", "-sS", "-L", "-o", "/dev/null", "-w", "%{http_code}",
             live_site.url(f"/redirect-to?url={target}")],
            env={**os.environ, **proxy.environment()},
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    assert result.stdout == "403"
    assert [refusal.target for refusal in proxy.refusals] == [target]


def test_the_proxy_relays_bodies_unchanged(live_site: LiveSite) -> None:
    with only(live_site.port), EgressProxy() as proxy:
        through = curl(proxy, live_site.url("/page2.html"))
    direct = subprocess.run(
        ["curl", "-sS", "--noproxy", "*", "-o", "-", "-w", "\n%{http_code}",
         live_site.url("/page2.html")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip

    assert through.stdout == direct.stdout


def test_an_unreachable_host_is_told_apart_from_a_refusal(live_site: LiveSite) -> None:
    with only(None), EgressProxy() as proxy:
        result = curl(proxy, "http://127.0.0.1:9/")  # discard: nothing listens

    assert result.stdout.endswith("\n502")
    assert proxy.refusals == []
    assert "Connection refused" in proxy.unreachable[0].reason


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("wget", ["--tries=1", "-O", "out"]),
        ("curl", ["-sS", "-o", "out"]),
        ("git", ["ls-remote"]),
        ("yt-dlp", ["--no-config", "--simulate"]),
    ],
)
def test_every_tool_run_by_vellum_goes_through_the_policy(
    tool: str, arguments: list[str], bare_site: LiveSite, tmp_path: Path
) -> None:
    # bare_site is on 127.0.0.1 too, but on a port the allowance does not open.
    url = bare_site.url("/page2.html")
    requests_before = len(bare_site.requests)

    with only(bare_site.port + 1):
        done = run_command(
            [find_binary(tool), *arguments, url],
            cwd=tmp_path,
            timeout=30,
            log_path=tmp_path / "tool.log",
            env={"GIT_ALLOW_PROTOCOL": "http:https", "GIT_TERMINAL_PROMPT": "0"},
        )

    assert len(bare_site.requests) == requests_before
    assert done.refusals, (tmp_path / "tool.log").read_text()
    assert done.refusals[0].reason == "127.0.0.1 is a loopback address"


@pytest.mark.django_db
def test_a_results_refusals_show_in_the_admin_and_on_the_snapshot_page(admin_client) -> None:
    snapshot = baker.make(Snapshot, url="http://a.example/", status=SnapshotStatus.SEALED)
    line = "http://127.0.0.2:6379/x.png: 127.0.0.2 is a loopback address"
    result = baker.make(
        ArchiveResult, snapshot=snapshot, extractor="wget", status=ResultStatus.SUCCEEDED,
        refused=[line], retry_at=None,
    )  # fmt: skip

    admin_page = admin_client.get(reverse("admin:core_archiveresult_change", args=[result.pk]))
    snapshot_page = admin_client.get(reverse("core:snapshot", args=[snapshot.pk]))

    assert line in admin_page.content.decode()
    assert "1 fetch refused by the address policy" in snapshot_page.content.decode()
    assert line in snapshot_page.content.decode()


class KeepAliveServer:
    """A raw server that answers every request on a connection with ``ok`` and keeps the
    connection open whatever the request asked (as a hostile server may): it records each
    request head it read, and every byte it received."""

    def __init__(self, host: str) -> None:
        self.heads: list[bytes] = []
        self.received = bytearray()
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        buffered = b""
        with connection:
            while data := connection.recv(65536):
                self.received += data
                buffered += data
                while b"\r\n\r\n" in buffered:
                    head, _, buffered = buffered.partition(b"\r\n\r\n")
                    self.heads.append(head)
                    connection.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok"
                    )

    def stop(self) -> None:
        self.listener.close()


@pytest.fixture
def keep_alive() -> Iterator[tuple[KeepAliveServer, KeepAliveServer]]:
    servers = KeepAliveServer("127.0.0.1"), KeepAliveServer("127.0.0.2")
    yield servers
    for server in servers:
        server.stop()


def test_a_second_request_on_a_kept_connection_never_reaches_the_first_origin(keep_alive) -> None:
    allowed, private = keep_alive
    with only(allowed.port), EgressProxy() as proxy:
        client = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])))
        client.settimeout(5)
        client.sendall(
            f"GET http://127.0.0.1:{allowed.port}/a HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n".encode()
        )
        first = client.recv(65536)
        with contextlib.suppress(OSError):
            client.sendall(
                f"GET http://127.0.0.2:{private.port}/secret HTTP/1.1\r\n"
                "Host: 127.0.0.2\r\nCookie: session=1\r\n\r\n".encode()
            )
        second = b""
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                second += data
        client.close()

    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nConnection: close\r\n" in first
    assert b"keep-alive" not in first.lower()
    assert second == b""
    assert [head.split(b"\r\n")[0] for head in allowed.heads] == [b"GET /a HTTP/1.1"]
    assert private.heads == []


def test_the_origin_sees_the_checked_host_and_a_request_body(keep_alive) -> None:
    allowed, _private = keep_alive
    with only(allowed.port), EgressProxy() as proxy:
        result = subprocess.run(
            ["curl", "-sS", "-H", "Host: 127.0.0.2", "--data", "x=1",
             f"http://127.0.0.1:{allowed.port}/form"],
            env={**os.environ, **proxy.environment()},
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    assert result.stdout == "ok"
    (head,) = allowed.heads
    assert head.startswith(b"POST /form HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{allowed.port}".encode() in head
    assert b"127.0.0.2" not in head


def proxy_client(proxy: EgressProxy) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])))
    client.settimeout(10)
    return client


def answer_of(client: socket.socket) -> bytes:
    answer = b""
    with contextlib.suppress(OSError):
        while data := client.recv(65536):
            answer += data
    client.close()
    return answer


def test_a_head_sent_in_pieces_is_passed_on_whole_and_its_body_after_it(keep_alive) -> None:
    allowed, _private = keep_alive
    request = (
        f"POST http://127.0.0.1:{allowed.port}/form HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Length: 9\r\n\r\nname=body"
    ).encode()
    cut = request.index(b"\r\n\r\n") + 2  # between the two line ends of the blank line
    with only(allowed.port), EgressProxy() as proxy:
        client = proxy_client(proxy)
        for piece in (request[:20], request[20:cut], request[cut:]):
            client.sendall(piece)
            time.sleep(0.2)  # each piece arrives on its own
        answer = answer_of(client)

    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"ok")
    (head,) = allowed.heads
    assert head.startswith(b"POST /form HTTP/1.1\r\n") and b"\r\nContent-Length: 9" in head
    assert bytes(allowed.received).endswith(b"\r\n\r\nname=body")


def test_a_request_head_too_long_is_refused_and_never_passed_on(keep_alive) -> None:
    allowed, _private = keep_alive
    padding = "".join(f"X-Pad-{i}: {'a' * 1000}\r\n" for i in range(70))  # 70 KB of fields
    with only(allowed.port), EgressProxy() as proxy:
        client = proxy_client(proxy)
        with contextlib.suppress(OSError):  # the proxy may close before all of it is sent
            client.sendall(
                f"GET http://127.0.0.1:{allowed.port}/ HTTP/1.1\r\n{padding}\r\n".encode()
            )
        answer = answer_of(client)

    assert answer.startswith(b"HTTP/1.1 431 Request head longer than 65536 bytes")
    assert allowed.received == b""


def test_a_chunked_request_body_is_refused(live_site: LiveSite) -> None:
    with only(live_site.port), EgressProxy() as proxy:
        result = subprocess.run(
            ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
             "-H", "Transfer-Encoding: chunked", "--data", "x=1", live_site.url("/")],
            env={**os.environ, **proxy.environment()},
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    assert result.stdout == "411"


def test_the_refusal_reasons_kept_follow_the_allowed_networks() -> None:
    # The answers are cached: a change of ALLOWED_PRIVATE_NETWORKS or ``also`` must still tell.
    loopback = "127.0.0.1 is a loopback address"
    with override_settings(ALLOWED_PRIVATE_NETWORKS=[]):
        assert refusal_reason("127.0.0.1", 80) == loopback
        assert refusal_reason("127.0.0.1", 80, also=[(ip_network("127.0.0.0/8"), 80)]) is None
    with only(80):
        assert refusal_reason("127.0.0.1", 80) is None
    with override_settings(ALLOWED_PRIVATE_NETWORKS=[]):
        assert refusal_reason("127.0.0.1", 80) == loopback


def request_head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def test_a_request_head_is_read_into_its_parts_and_fields_in_order() -> None:
    request = parse_request_head(
        request_head(
            "GET http://a.example/x?y=1 HTTP/1.1", "Host: a.example", "Accept: \t*/*  ",
            "X-Empty:", "x-dup: 1", "X-Dup:2",
        )
    )  # fmt: skip
    many = parse_request_head(request_head("GET / HTTP/1.0", *["X-A: 1"] * 100))

    assert request == RequestHead(
        "GET", "http://a.example/x?y=1", "HTTP/1.1",
        (("Host", "a.example"), ("Accept", "*/*"), ("X-Empty", ""), ("x-dup", "1"),
         ("X-Dup", "2")),
    )  # fmt: skip
    assert request.values("X-DUP") == ["1", "2"]
    assert request.get("accept") == "*/*"
    assert (many.version, len(many.fields)) == ("HTTP/1.0", 100)


@pytest.mark.parametrize(
    ("lines", "status"),
    [
        (["GET /x"], 400),
        (["GET  /x HTTP/1.1"], 400),
        (["GET /x HTTP/1.1 "], 400),
        (["G(T /x HTTP/1.1"], 400),
        (["GET /x HTTP/1"], 400),
        (["GET /x http/1.1"], 400),
        (["GET /x HTTP/2.0"], 505),
        (["GET /x HTTP/3.0"], 505),
        (["GET /x HTTP/1.1\nHost: a"], 400),
        (["GET /x HTTP/1.1", "Host: a\nX-A: 1"], 400),
        (["GET /x HTTP/1.1", "Host: a\rX-A: 1"], 400),
        (["GET /x HTTP/1.1", "Host a"], 400),
        (["GET /x HTTP/1.1", "Host : a"], 400),
        (["GET /x HTTP/1.1", ": a"], 400),
        (["GET /x HTTP/1.1", "X(A): 1"], 400),
        (["GET /x HTTP/1.1", "X-A: 1", " folded: 2"], 400),
        (["GET /x HTTP/1.1", "X-A: 1", "\tfolded"], 400),
        (["GET /x HTTP/1.1", *["X-A: 1"] * 101], 431),
    ],
)
def test_a_malformed_request_head_is_refused_with_its_status(lines: list[str], status: int) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request_head(request_head(*lines))

    assert refused.value.status == status


def answer_until(client: socket.socket, end: bytes) -> bytes:
    """What ``client`` receives until it ends with ``end`` (a KeepAliveServer never closes)."""
    answer = b""
    while not answer.endswith(end) and (data := client.recv(65536)):
        answer += data
    return answer


@pytest.mark.parametrize(
    ("lines", "answer"),
    [
        (["GET {url} HTTP/1.1", "X-A: 1", " folded"], b"400 Bad header field line ' folded'"),
        (["BREW {url} HTTP/1.1"], b"501 Unsupported method 'BREW'"),
        (["POST {url} HTTP/1.1", "Content-Length: 3", "Content-Length: 4"], b"411 "),
        (["POST {url} HTTP/1.1", "Transfer-Encoding: identity"], b"411 "),
        (["POST {url} HTTP/1.1", "Content-Length: 3a"], b"400 the Content-Length is not"),
        # "²".isdigit() is True, and int("²") raises: only ASCII digits are a length.
        (["POST {url} HTTP/1.1", "Content-Length: \xb2"], b"400 the Content-Length is not"),
        (["CONNECT 127.0.0.1:99999 HTTP/1.1"], b"400 CONNECT needs host:port, the port in"),
    ],
)  # fmt: skip
def test_a_request_the_proxy_will_not_pass_on_is_answered_by_it_and_reaches_no_origin(
    lines: list[str], answer: bytes, keep_alive
) -> None:
    allowed, _private = keep_alive
    url = f"http://127.0.0.1:{allowed.port}/"
    with only(allowed.port), EgressProxy() as proxy:
        client = proxy_client(proxy)
        client.sendall(request_head(*(line.format(url=url) for line in lines)))
        got = answer_of(client)

    assert got.startswith(b"HTTP/1.1 " + answer)
    assert b"\r\nProxy-Status: vellum-egress; error=http_request_error\r\n" in got
    assert b"\r\nConnection: close\r\n" in got
    assert allowed.received == b""


def test_a_head_request_refused_by_the_policy_is_answered_without_a_body(keep_alive) -> None:
    allowed, private = keep_alive
    with only(allowed.port), EgressProxy() as proxy:
        client = proxy_client(proxy)
        client.sendall(request_head(f"HEAD http://127.0.0.2:{private.port}/ HTTP/1.1"))
        answer = answer_of(client)

    assert answer.startswith(b"HTTP/1.1 403 Refused by the address policy: 127.0.0.2 is a")
    assert b"\r\nProxy-Status: vellum-egress; error=destination_ip_prohibited\r\n" in answer
    assert answer.endswith(b"\r\nConnection: close\r\n\r\n")  # and not a byte after the head
    assert private.received == b""


def test_the_fields_the_connection_field_names_are_not_passed_on(keep_alive) -> None:
    allowed, _private = keep_alive
    with only(allowed.port), EgressProxy() as proxy:
        client = proxy_client(proxy)
        client.sendall(
            request_head(
                f"GET http://127.0.0.1:{allowed.port}/ HTTP/1.1", "Connection: close, x-secret",
                "X-Secret: 1", "X-Kept: 2",
            )
        )  # fmt: skip
        answer = answer_until(client, b"ok")
        client.close()

    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    (head,) = allowed.heads
    assert b"\r\nX-Kept: 2" in head
    assert b"secret" not in head.lower()


def test_a_connection_is_answered_while_a_tunnel_is_held_open(keep_alive) -> None:
    allowed, _private = keep_alive
    get = request_head(f"GET http://127.0.0.1:{allowed.port}/plain HTTP/1.1")
    with only(allowed.port), EgressProxy() as proxy:
        first = proxy_client(proxy)
        first.sendall(get)
        answer_until(first, b"ok")
        first.close()
        time.sleep(0.2)  # its relay thread is idle again: the tunnel takes it
        tunnel = proxy_client(proxy)
        tunnel.sendall(request_head(f"CONNECT 127.0.0.1:{allowed.port} HTTP/1.1"))
        established = answer_until(tunnel, b"\r\n\r\n")
        started = time.monotonic()
        second = proxy_client(proxy)
        second.settimeout(5)
        second.sendall(get)
        answer = answer_until(second, b"ok")
        waited = time.monotonic() - started
        second.close()
        tunnel.sendall(request_head("GET /through HTTP/1.1", "Host: 127.0.0.1"))
        through = answer_until(tunnel, b"ok")
        tunnel.close()

    assert established == b"HTTP/1.1 200 Connection established\r\n\r\n"
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and waited < 3
    assert through.startswith(b"HTTP/1.1 200 OK\r\n")
    assert [head.split(b"\r\n")[0] for head in allowed.heads] == [
        b"GET /plain HTTP/1.1", b"GET /plain HTTP/1.1", b"GET /through HTTP/1.1",
    ]  # fmt: skip


def test_sequential_connections_are_all_answered_by_a_reused_relay_thread(
    live_site: LiveSite,
) -> None:
    def relays() -> set[threading.Thread]:
        return {thread for thread in threading.enumerate() if thread.name == "egress-relay"}

    before = relays()
    with only(live_site.port), EgressProxy() as proxy:
        answers = []
        for _ in range(5):
            client = proxy_client(proxy)
            client.sendall(request_head(f"GET {live_site.url('/page2.html')} HTTP/1.1"))
            answers.append(answer_of(client))
            time.sleep(0.1)  # the relay thread is idle again before the next connection
        started = relays() - before

    assert [answer.split(b" ", 2)[1] for answer in answers] == [b"200"] * 5
    assert len({answer.partition(b"\r\n\r\n")[2] for answer in answers}) == 1
    assert len(started) == 1


def test_a_tunnel_passes_bytes_both_ways_and_each_sides_end_of_stream() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def echo_until_end() -> None:  # what the client sends, back, then its end
            origin, _ = listener.accept()
            with origin:
                while data := origin.recv(65536):
                    origin.sendall(data)
                origin.shutdown(socket.SHUT_WR)

        server = threading.Thread(target=echo_until_end, daemon=True)
        server.start()
        port = listener.getsockname()[1]
        with only(port), EgressProxy() as proxy:
            tunnel = proxy_client(proxy)
            tunnel.settimeout(5)
            tunnel.sendall(request_head(f"CONNECT 127.0.0.1:{port} HTTP/1.1"))
            established = answer_until(tunnel, b"\r\n\r\n")
            sent = os.urandom(100_000)
            tunnel.sendall(sent)
            tunnel.shutdown(socket.SHUT_WR)  # the proxy must pass this end on to the origin
            echoed = answer_of(tunnel)  # read until the origin's end comes back through
            tunnel.close()
        server.join(timeout=5)

    assert established == b"HTTP/1.1 200 Connection established\r\n\r\n"
    assert echoed == sent
    assert not server.is_alive()
