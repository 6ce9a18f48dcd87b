"""Credentials given to the tools never reach what readers see (issue 16 item 5, DESIGN.md §8).

The end-to-end test runs the real headers (curl) and wget extractors against the live test site
with EXTRACTOR_OPTIONS carrying a bearer token, a password and a URL with ``user:pass@``, with
the tools' debug output on, then looks for each secret in every file of the sealed snapshot
(WARCs and the WACZ opened), in index.json, in the database and in the admin's result page.
"""

from __future__ import annotations

import gzip
import importlib
import io
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.db import connection
from django.urls import reverse
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.redaction import REDACTED, redact, redact_command
from core.extractors.scrubbing import redact_text, scrub_folder
from core.folder.manifest import INDEX_NAME
from core.models import ArchiveResult, Snapshot
from core.services.results import result_tick
from core.services.snapshots import snapshot_check_results, snapshot_start
from core.tests.site import LiveSite
from crawls.choices import CrawlStatus
from crawls.models import Crawl

TOKEN = "s3cr3t-token"
CURL_PASSWORD = "curl-pa55word"
WGET_PASSWORD = "wget-pa55word"
REFERER_PASSWORD = "referer-pa55word"
SECRETS = (TOKEN, CURL_PASSWORD, WGET_PASSWORD, REFERER_PASSWORD)
R = REDACTED


# --- the recorded form of a command --------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmd", "recorded"),
    [
        (
            ["/usr/bin/wget", "--header=Authorization: Bearer x1"],
            ["/usr/bin/wget", f"--header=Authorization: {REDACTED}"],
        ),
        (
            ["/usr/bin/curl", "--header", "Cookie: session=abc"],
            ["/usr/bin/curl", "--header", f"Cookie: {REDACTED}"],
        ),
        (["curl", "-H", "X-Api-Key: k"], ["curl", "-H", f"X-Api-Key: {REDACTED}"]),
        (["curl", "-HX-Api-Key: k"], ["curl", f"-HX-Api-Key: {REDACTED}"]),
        (
            ["yt-dlp", "--add-header", "Referer:x"],
            ["yt-dlp", "--add-header", f"Referer: {REDACTED}"],
        ),
        (["curl", "-u", "alice:pw"], ["curl", "-u", f"alice:{REDACTED}"]),
        (["curl", "--user=alice:pw"], ["curl", f"--user=alice:{REDACTED}"]),
        (["curl", "--proxy-user", "bob:pw"], ["curl", "--proxy-user", f"bob:{REDACTED}"]),
        (["wget", "--password=pw"], ["wget", f"--password={REDACTED}"]),
        (["wget", "--http-password", "pw"], ["wget", "--http-password", REDACTED]),
        (["wget", "--ftp-password=pw"], ["wget", f"--ftp-password={REDACTED}"]),
        (["wget", "--proxy-password=pw"], ["wget", f"--proxy-password={REDACTED}"]),
        (["curl", "--netrc-file", "/run/n"], ["curl", "--netrc-file", REDACTED]),
        (["curl", "--oauth2-bearer", "t"], ["curl", "--oauth2-bearer", REDACTED]),
        (["yt-dlp", "-p", "pw"], ["yt-dlp", "-p", REDACTED]),
        (["tool", "--api-token=t"], ["tool", f"--api-token={REDACTED}"]),
        (
            ["git", "-c", "http.extraHeader=Authorization: Basic QQ=="],
            ["git", "-c", f"http.extraHeader=Authorization: {REDACTED}"],
        ),
        (
            ["wget", "https://alice:pw@example.org/a", "--referer=http://tok@example.org/"],
            [
                "wget",
                f"https://{REDACTED}@example.org/a",
                f"--referer=http://{REDACTED}@example.org/",
            ],
        ),
    ],
)
def test_redact_command_hides_every_credential_form(cmd: list[str], recorded: list[str]) -> None:
    assert redact_command(cmd) == recorded
    assert redact_command(recorded) == recorded  # idempotent: a recorded command stays as is


# Forms the tools accept that a first version let through (each reads as its tool reads it).
@pytest.mark.parametrize(
    ("cmd", "recorded"),
    [
        # yt-dlp's own spelling (media.py uses it), and an abbreviation of it (optparse).
        (["yt-dlp", "--add-headers", "Cookie:a=b"], ["yt-dlp", "--add-headers", f"Cookie: {R}"]),
        (["yt-dlp", "--add-head=X-Key:k"], ["yt-dlp", f"--add-head=X-Key: {R}"]),
        (["yt-dlp", "-vp", "pw"], ["yt-dlp", "-vp", R]),
        (["yt-dlp", "-vppw"], ["yt-dlp", f"-vp{R}"]),
        # wget's wgetrc commands, in any case and with "-" or "_" (wget's init.c).
        (
            ["wget", "-e", "header=Authorization: Bearer t"],
            ["wget", "-e", f"header=Authorization: {R}"],
        ),
        (["wget", "-e", "header = X-Key: k"], ["wget", "-e", f"header = X-Key: {R}"]),
        (["wget", "--execute", "http_password=pw"], ["wget", "--execute", f"http_password={R}"]),
        (["wget", "--execute=http_passwd=pw"], ["wget", f"--execute=http_passwd={R}"]),
        (["wget", "-e", "HTTP-Password = pw"], ["wget", "-e", f"HTTP-Password = {R}"]),
        (["wget", "-e", "ftp_password=pw"], ["wget", "-e", f"ftp_password={R}"]),
        (["wget", "-e", "proxy_passwd=pw"], ["wget", "-e", f"proxy_passwd={R}"]),
        (["wget", "-e", "password=pw"], ["wget", "-e", f"password={R}"]),
        (["wget", "-e", "user=alice:pw"], ["wget", "-e", f"user=alice:{R}"]),
        (["wget", "-qehttp_password=pw"], ["wget", f"-qehttp_password={R}"]),
        (["wget", "-e", "robots=off"], ["wget", "-e", "robots=off"]),
        # GNU getopt_long takes an unambiguous prefix of a long option.
        (["wget", "--http-pass=pw"], ["wget", f"--http-pass={R}"]),
        (["wget", "--http-pass", "pw"], ["wget", "--http-pass", R]),
        (["wget", "--head=Authorization: Bearer t"], ["wget", f"--head=Authorization: {R}"]),
        (["wget", "--proxy-pa=pw"], ["wget", f"--proxy-pa={R}"]),
        (["wget", "--pass=pw"], ["wget", f"--pass={R}"]),
        # curl 7.88 does too (`curl --verb` is --verbose), and clusters short options.
        (["curl", "--head", "https://example.org/"], ["curl", "--head", "https://example.org/"]),
        (["curl", "--heade", "X-Key: k"], ["curl", "--heade", f"X-Key: {R}"]),
        (["curl", "--oauth2", "t"], ["curl", "--oauth2", R]),
        (["curl", "-sH", "Authorization: Bearer t"], ["curl", "-sH", f"Authorization: {R}"]),
        (["curl", "-sHAuthorization:Bearer t"], ["curl", f"-sHAuthorization: {R}"]),
        (["curl", "-su", "alice:pw"], ["curl", "-su", f"alice:{R}"]),
        (["curl", "-vsualice:pw"], ["curl", f"-vsualice:{R}"]),
        (["curl", "-sLb", "session=abc"], ["curl", "-sLb", R]),
        # A letter that takes a value takes the rest: "-oH" writes to a file named "H".
        (["curl", "-oH", "https://example.org/"], ["curl", "-oH", "https://example.org/"]),
        # git clone's --config (parse-options takes prefixes too) and -c clustered.
        (
            ["git", "--conf=http.extraHeader=X-Key: k"],
            ["git", f"--conf=http.extraHeader=X-Key: {R}"],
        ),
        (["git", "-qc", "credential.token=t"], ["git", "-qc", f"credential.token={R}"]),
    ],
)
def test_redact_command_reads_each_tool_as_it_does(cmd: list[str], recorded: list[str]) -> None:
    found = redact(cmd)
    assert found.cmd == recorded
    assert redact_command(recorded) == recorded


def test_the_user_agent_given_as_a_header_stays() -> None:
    cmd = ["yt-dlp", "--add-headers", "User-Agent:Vellum/1", "--add-headers", "X-Key:k"]

    found = redact(cmd)

    assert found.cmd == [
        "yt-dlp",
        "--add-headers",
        "User-Agent:Vellum/1",
        "--add-headers",
        f"X-Key: {R}",
    ]
    assert found.headers == {"X-Key"}


def test_a_wgetrc_header_is_found_again_in_the_log() -> None:
    found = redact(["-e", "header=X-Api-Key: abcdef123"], tool="wget")

    text = redact_text(
        "---request begin---\nX-Api-Key: abcdef123\n", secrets=found.secrets, headers=found.headers
    )

    assert text == f"---request begin---\nX-Api-Key: {R}\n"


@pytest.mark.parametrize(
    "cmd",
    [
        # wget's -H spans hosts and -u is no option of wget: nothing follows them is a secret.
        ["/usr/bin/wget", "-H", "http://example.org/a:b", "-u", "x:y"],
        ["wget", "--keep-session-cookies", "--user=alice", "--user-agent=Mozilla/5.0 (X11)"],
        ["curl", "--header", "@/etc/headers", "-H", "X-Empty;", "https://example.org/?a=b@c"],
        ["yt-dlp", "-u", "alice", "https://example.org/watch?v=1"],
    ],
)
def test_redact_command_keeps_what_is_no_secret(cmd: list[str]) -> None:
    assert redact_command(cmd) == cmd


def test_redact_text_hides_echoed_headers_urls_and_known_values() -> None:
    found = redact(["--header=X-Api-Key: abcdef123", "--http-password=hunter22"], tool="wget")
    log = (
        "> Authorization: Bearer zzz\n"
        "Setting --header (header) to X-Api-Key: abcdef123\n"
        "Setting --http-password (httppassword) to hunter22\n"
        "--2024-01-01--  http://bob:pw@example.org/\n"
        "Set-Cookie: site=kept\n"
    )

    text = redact_text(log, secrets=found.secrets, headers=found.headers)

    for secret in ("zzz", "abcdef123", "hunter22", "bob:pw"):
        assert secret not in text
    assert f"> Authorization: {REDACTED}" in text
    assert f"X-Api-Key: {REDACTED}" in text
    assert f"http://{REDACTED}@example.org/" in text
    assert "Set-Cookie: site=kept" in text  # the archived server's cookie is the archive's


def test_scrub_folder_rewrites_logs_only_when_needed(tmp_path: Path) -> None:
    (tmp_path / "tool.log").write_text("Cookie: a=b\n")
    (tmp_path / "page.html").write_text("Cookie: a=b\n")  # what the server sent stays

    assert scrub_folder(tmp_path, []) == [tmp_path / "tool.log"]
    assert scrub_folder(tmp_path, []) == []
    assert (tmp_path / "tool.log").read_text() == f"Cookie: {REDACTED}\n"
    assert (tmp_path / "page.html").read_text() == "Cookie: a=b\n"


# --- end to end: curl and wget, with their debug output on ----------------------------------------


def extractor_options(site: LiveSite) -> dict:
    """Credentials in every form the issue names, and the tools' debug output that echoes them."""
    return {
        "headers": {
            "arguments": [
                "--verbose",  # curl's trace prints "> Authorization: ..."
                "--header",
                f"Authorization: Bearer {TOKEN}",
                "--user",
                f"alice:{CURL_PASSWORD}",
            ]
        },
        "wget": {
            "arguments": [
                "--debug",  # wget prints every request header, and each option it was given
                f"--header=Authorization: Bearer {TOKEN}",
                "--http-user=alice",
                f"--http-password={WGET_PASSWORD}",
                f"--referer=http://alice:{REFERER_PASSWORD}@{site.url('/')[7:]}",
            ]
        },
    }


def every_text(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` as bytes, gzip members and ZIP entries (WACZ) opened."""
    texts = {}
    for path in folder.rglob("*"):
        if path.is_file():
            texts.update(_opened(str(path.relative_to(folder)), path.read_bytes()))
    return texts


def _opened(name: str, data: bytes) -> dict[str, bytes]:
    if data[:2] == b"\x1f\x8b":
        return {name: gzip.decompress(data)}
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            opened = {}
            for member in archive.namelist():
                opened.update(_opened(f"{name}/{member}", archive.read(member)))
            return opened
    return {name: data}


@pytest.fixture
def sealed(live_site: LiveSite, settings, tmp_path: Path) -> Snapshot:
    """A snapshot of the live site's home page by the headers and wget extractors, sealed."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.EXTRACTORS = ["headers", "wget"]
    settings.EXTRACTOR_OPTIONS = extractor_options(live_site)
    url = live_site.url("/")
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=url)
    snapshot = baker.make(Snapshot, crawl=crawl, url=url, status=SnapshotStatus.QUEUED)
    snapshot_start(snapshot=snapshot)
    for result in ArchiveResult.objects.filter(snapshot=snapshot):
        result_tick(result=result)
    snapshot_check_results(snapshot=Snapshot.objects.get(pk=snapshot.pk))
    return Snapshot.objects.get(pk=snapshot.pk)


@pytest.mark.django_db
def test_credentials_reach_the_server_but_no_file_of_the_snapshot(
    sealed: Snapshot, live_site: LiveSite
) -> None:
    states = dict(sealed.results.values_list("extractor", "status"))
    assert states == {"headers": ResultStatus.SUCCEEDED, "wget": ResultStatus.SUCCEEDED}
    assert sealed.status == SnapshotStatus.SEALED
    sent = [headers.get("Authorization") for path, headers in live_site.requests if path == "/"]
    assert sent.count(f"Bearer {TOKEN}") >= 2  # curl's request and wget's both carried it

    texts = every_text(sealed.output_dir)
    assert any(name.endswith(".wacz") or ".wacz/" in name for name in texts)
    for name, data in texts.items():
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {name}"
    # The tools' debug output is still there, with the header named and its value hidden.
    assert f"> Authorization: {REDACTED}".encode() in texts["headers/curl.log"]
    assert f"Authorization: {REDACTED}".encode() in texts["wget/wget.log"]
    assert b"Authorization: ...redacted..." in texts["wget/warc/archive.warc.gz"]


@pytest.mark.django_db
def test_recorded_commands_name_the_header_without_its_value(sealed: Snapshot) -> None:
    index = (sealed.output_dir / INDEX_NAME).read_text(encoding="utf-8")
    for result in sealed.results.all():
        recorded = " ".join(result.cmd)
        assert f"Authorization: {REDACTED}" in recorded
        assert not any(secret in recorded for secret in SECRETS)
    assert not any(secret in index for secret in SECRETS)
    assert f"Authorization: {REDACTED}" in index
    assert f"alice:{REDACTED}" in index


@pytest.mark.django_db
def test_admin_result_page_shows_no_credential(sealed: Snapshot, client) -> None:
    admin = get_user_model().objects.create_superuser("root", password="x" * 12)
    client.force_login(admin)
    for result in sealed.results.all():
        url = reverse("admin:core_archiveresult_change", args=[result.pk])
        page = client.get(url).content.decode()
        assert f"Authorization: {REDACTED}" in page
        assert not any(secret in page for secret in SECRETS)


@pytest.mark.django_db
def test_admin_redacts_a_command_recorded_before_redaction_existed(client) -> None:
    result = baker.make(
        ArchiveResult,
        extractor="wget",
        cmd=["/usr/bin/wget", f"--header=Authorization: Bearer {TOKEN}"],
    )
    client.force_login(get_user_model().objects.create_superuser("root", password="x" * 12))

    page = client.get(reverse("admin:core_archiveresult_change", args=[result.pk])).content
    assert TOKEN.encode() not in page
    assert f"--header=Authorization: {REDACTED}".encode() in page


@pytest.mark.django_db
def test_the_migration_redacts_commands_recorded_before_redaction_existed() -> None:
    migration = importlib.import_module("core.migrations.0009_redact_recorded_commands")
    old = ["/usr/bin/curl", "-sH", f"Authorization: Bearer {TOKEN}", "https://example.org/"]
    earlier = {"status": "failed", "cmd": ["/usr/bin/wget", f"--http-pass={WGET_PASSWORD}"]}
    leaky = baker.make(ArchiveResult, extractor="headers", cmd=old, history=[earlier, {"x": 1}])
    clean = baker.make(ArchiveResult, extractor="wget", cmd=["/usr/bin/wget", "-e", "robots=off"])

    migration.redact_recorded_commands(django_apps, SimpleNamespace(connection=connection))

    leaky.refresh_from_db()
    assert leaky.cmd == [
        "/usr/bin/curl",
        "-sH",
        f"Authorization: {REDACTED}",
        "https://example.org/",
    ]
    assert leaky.history == [
        {"status": "failed", "cmd": ["/usr/bin/wget", f"--http-pass={REDACTED}"]},
        {"x": 1},  # an entry without a command is kept as it is
    ]
    clean.refresh_from_db()
    assert clean.cmd == ["/usr/bin/wget", "-e", "robots=off"]
