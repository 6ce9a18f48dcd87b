"""Personas (issue 21 item 1): import, encryption at rest, the persona command, a crawl naming
one (add, schedule, the add page, the API, the admin), and what the tools are given."""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import shutil
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.extractors.base import Extractor, ExtractorOutput
from core.extractors.credentials import (
    Cookie,
    Credentials,
    cookies_file,
    parse_cookies,
    persona_arguments,
    persona_files,
)
from core.extractors.errors import Outcome
from core.extractors.git import GitExtractor, persona_config
from core.extractors.media import MediaExtractor
from core.extractors.scrubbing import scrub_folder
from core.services.crawls import CrawlOptions, crawl_create
from core.services.personas import persona_remove, persona_save
from core.services.results import _persona_credentials, _run_extractor
from core.tests.users import staff_with
from crawls import persona_store
from crawls.models import Crawl, CrawlSchedule, Persona
from crawls.persona_store import KEY_NAME
from crawls.seeds import InputError, domain_match

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

VALUE = "tok-9d8e7f6a5b4c"
COOKIES_TXT = (
    "# Netscape HTTP Cookie File\n"
    f"#HttpOnly_.example.com\tTRUE\t/\tTRUE\t2000000000\tsid\t{VALUE}\n"
    "example.com\tFALSE\t/app\tFALSE\t0\ttheme\tdark\n"
)
STORAGE_STATE = json.dumps(
    {
        "cookies": [
            {"name": "sid", "value": VALUE, "domain": ".example.com", "path": "/",
             "expires": -1, "httpOnly": True, "secure": True, "sameSite": "Lax"}
        ],
        "origins": [],
    }
)  # fmt: skip


# --- import and encryption -----------------------------------------------------------------------


def test_a_cookies_txt_is_read_with_its_httponly_lines() -> None:
    cookies = parse_cookies(COOKIES_TXT)

    assert cookies == [
        Cookie("sid", VALUE, ".example.com", "/", secure=True, http_only=True, expires=2000000000),
        Cookie("theme", "dark", "example.com", "/app", expires=None),
    ]


def test_a_playwright_storage_state_is_read() -> None:
    assert parse_cookies(STORAGE_STATE) == [
        Cookie("sid", VALUE, ".example.com", "/", secure=True, http_only=True, expires=None)
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("this is not a cookie file\n\tat all", "not a Netscape cookies.txt"),
        ('{"origins": []}', "not a Playwright storage state"),
        ('{"cookies": [{"name": "a"}]}', "not a Playwright storage state"),
    ],
)
def test_bad_cookie_files_are_refused_with_a_clear_error(text, message) -> None:
    with pytest.raises(InputError, match=message):
        persona_save(name="reader", cookies=text)
    assert not Persona.objects.exists()


def test_secrets_are_stored_encrypted_with_a_private_key(data_dir: Path) -> None:
    persona = persona_save(name="reader", cookies=COOKIES_TXT, headers=["X-Api-Key: k-12345"])

    stored = Persona.objects.get(pk=persona.pk)
    assert VALUE not in stored.secrets and "k-12345" not in stored.secrets
    held = stored.credentials()
    assert [c.value for c in held.cookies] == [VALUE, "dark"]
    assert held.headers == {"X-Api-Key": "k-12345"}
    key = data_dir / "keys" / KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_persona_the_key_does_not_open_says_so(data_dir: Path) -> None:
    persona_save(name="reader", cookies=COOKIES_TXT)
    (data_dir / "keys" / KEY_NAME).unlink()  # a new key is made: the old secrets are lost

    persona = Persona.objects.get(name="reader")
    with pytest.raises(ValueError, match="cannot be decrypted"):
        persona.credentials()
    assert "cannot be decrypted" in persona.summary()


def test_a_persona_without_secrets_holds_none() -> None:
    """As the admin saves one given neither cookies nor headers (secrets stays empty)."""
    persona = Persona.objects.create(name="bare", user_agent="Reader/1.0")

    held = persona.credentials()
    assert (held.cookies, held.headers, held.user_agent) == ([], {}, "Reader/1.0")
    assert persona.summary() == "0 cookies, 0 headers"


def test_updating_keeps_what_is_not_given() -> None:
    persona_save(name="reader", cookies=COOKIES_TXT, headers=["X-A: 1"])
    persona_save(name="reader", user_agent="Reader/1.0")

    held = Persona.objects.get(name="reader").credentials()
    assert (len(held.cookies), held.headers, held.user_agent) == (2, {"X-A": "1"}, "Reader/1.0")


@pytest.mark.parametrize(
    ("name", "headers", "message"),
    [("Not A Slug", [], "persona name"), ("reader", ["no colon here"], "'Name: value'")],
)
def test_bad_names_and_headers_are_refused(name, headers, message) -> None:
    with pytest.raises(InputError, match=message):
        persona_save(name=name, headers=headers)


# --- which hosts the headers are for -------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "domain", "matches"),
    [
        ("example.com", "example.com", True),
        ("EXAMPLE.com", ".example.com", True),  # a cookie's leading dot
        ("www.example.com", "example.com", True),
        ("a.b.example.com", "example.com", True),
        ("badexample.com", "example.com", False),  # a suffix, but not at a dot
        ("example.com", "www.example.com", False),
        ("example.com.evil.net", "example.com", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("10.0.0.1", "0.0.1", False),  # an IP address matches only itself
        ("", "example.com", False),
    ],
)
def test_hosts_domain_match_as_cookies_do(host, domain, matches) -> None:
    assert domain_match(host, domain) is matches


def test_headers_go_only_to_the_cookies_domains_and_those_given() -> None:
    persona_save(name="reader", cookies=COOKIES_TXT, headers=["Authorization: Bearer t-1234"],
                 domains=["API.Example.org", ".cdn.example.net"])  # fmt: skip
    held = Persona.objects.get(name="reader").credentials()

    assert held.header_domains == ("api.example.org", "cdn.example.net", "example.com")
    sent = {
        url: held.for_url(url).headers
        for url in [
            "https://example.com/a",
            "https://www.example.com/",
            "https://api.example.org/v1",
            "https://img.cdn.example.net/x.png",
            "https://example.org/",
            "https://tracker.example/",
        ]
    }
    assert sent == {
        "https://example.com/a": {"Authorization": "Bearer t-1234"},
        "https://www.example.com/": {"Authorization": "Bearer t-1234"},
        "https://api.example.org/v1": {"Authorization": "Bearer t-1234"},
        "https://img.cdn.example.net/x.png": {"Authorization": "Bearer t-1234"},
        "https://example.org/": {},
        "https://tracker.example/": {},
    }
    other = held.for_url("https://example.org/")
    assert other.cookies == held.cookies and other.user_agent == held.user_agent


def test_a_persona_with_headers_and_no_domain_sends_them_nowhere_and_says_so() -> None:
    persona = persona_save(name="api", headers=["X-Api-Key: k-12345"])

    assert persona.credentials().for_url("https://example.com/").headers == {}
    assert persona.summary() == "0 cookies, 1 headers (for no site: give a domain)"
    persona = persona_save(name="api", domains=["example.com"])
    assert persona.credentials().for_url("https://example.com/").headers == {"X-Api-Key": "k-12345"}


class Noting(Extractor):
    """An extractor that notes the credentials each run was given."""

    name = "noting"

    def __init__(self, credentials: Credentials | None = None) -> None:
        super().__init__(credentials)
        self.given: list[Credentials | None] = []

    def run(self, snapshot, out_dir: Path) -> ExtractorOutput:
        self.given.append(self.credentials)
        return ExtractorOutput(outcome=Outcome.SUCCEEDED)


def a_snapshot(pk: int, url: str, persona: Persona) -> SimpleNamespace:
    """What _run_extractor reads of a snapshot."""
    return SimpleNamespace(pk=pk, url=url, crawl_id=1, crawl=SimpleNamespace(persona=persona))


def test_a_capture_gets_the_headers_only_for_a_snapshot_on_their_domains(tmp_path: Path) -> None:
    persona = persona_save(name="reader", cookies=COOKIES_TXT, headers=["X-Api-Key: k-12345"])
    noting = Noting()

    _run_extractor(noting, a_snapshot(1, "https://www.example.com/", persona), tmp_path)
    _run_extractor(noting, a_snapshot(2, "https://elsewhere.example.org/", persona), tmp_path)

    on_domain, elsewhere = noting.given
    assert on_domain.headers == {"X-Api-Key": "k-12345"}
    assert elsewhere.headers == {} and len(elsewhere.cookies) == 2
    assert noting.credentials is None  # the shared instance ran a signed-in copy


def test_a_persona_is_decrypted_once_per_snapshot_and_its_key_read_once(
    tmp_path: Path, settings
) -> None:
    persona = persona_save(name="reader", cookies=COOKIES_TXT)
    persona_store._read_key.cache_clear()
    first = a_snapshot(1, "https://example.com/", persona)

    held = [_persona_credentials(first) for _ in range(3)]
    other = _persona_credentials(a_snapshot(2, "https://example.com/", persona))
    persona = persona_save(name="reader", user_agent="Reader/2")  # changed: decrypted anew
    changed = _persona_credentials(a_snapshot(1, "https://example.com/", persona))

    assert held[0] is held[1] is held[2]
    assert other is not held[0] and changed.user_agent == "Reader/2"
    assert persona_store._read_key.cache_info().misses == 1  # one key file, read once
    settings.KEYS_DIR = tmp_path / "other-keys"  # another DATA_DIR: its own key
    persona_store.encrypt("x")
    assert persona_store._read_key.cache_info().misses == 2


def test_the_command_takes_domains_and_refuses_what_is_no_host() -> None:
    out = io.StringIO()
    call_command("persona", "add", "api", "--header", "X-Api-Key: k-12345",
                 "--domain", "api.example.org", stdout=out)  # fmt: skip

    assert "1 headers (for api.example.org)" in out.getvalue()
    with pytest.raises(CommandError, match="not a host name or domain"):
        call_command("persona", "add", "api", "--domain", "bad domain!", stdout=out)


def test_the_admin_takes_header_domains_as_persona_add_does() -> None:
    client = Client()
    client.force_login(staff_with("keeper", "crawls.add_persona", "crawls.change_persona",
                                  "crawls.view_persona"))  # fmt: skip
    form = {"name": "api", "description": "", "user_agent": "", "headers": "X-Api-Key: k-12345"}

    client.post("/admin/crawls/persona/add/", {**form, "header_domains": '[".API.Example.org"]'})
    bad = [
        client.post("/admin/crawls/persona/add/", {**form, "name": f"bad{i}", "header_domains": v})
        for i, v in enumerate(['"example.org"', '["bad domain!"]'])
    ]

    persona = Persona.objects.get(name="api")
    assert persona.header_domains == ["api.example.org"]
    assert persona.credentials().for_url("https://api.example.org/").headers
    assert [r.status_code for r in bad] == [200, 200]  # the form again, with the error
    assert b"A JSON list of host names" in bad[0].content
    assert b"not a host name or domain" in bad[1].content
    assert not Persona.objects.filter(name__startswith="bad").exists()


# --- the command ---------------------------------------------------------------------------------


def test_the_command_adds_lists_and_removes_without_showing_secrets(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)  # no window to open: login says how
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    cookies = tmp_path / "cookies.txt"
    cookies.write_text(COOKIES_TXT)
    out = io.StringIO()

    call_command("persona", "add", "reader", "--cookies", str(cookies), "--keep-in-warcs",
                 "--header", "Authorization: Bearer abcdef123", stdout=out)  # fmt: skip
    call_command("persona", "list", stdout=out)
    call_command("persona", "login", "reader", "https://example.com/", stdout=out)
    call_command("persona", "remove", "reader", stdout=out)

    text = out.getvalue()
    assert "reader: 2 cookies, 1 headers (for example.com), kept in WARCs" in text
    assert "--save-storage" in text
    assert VALUE not in text and "abcdef123" not in text
    assert not Persona.objects.exists()


def test_the_command_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command("persona", "add", "reader", "--cookies", str(tmp_path / "missing.txt"))
    with pytest.raises(CommandError, match="no persona 'nobody'"):
        call_command("persona", "remove", "nobody")


# --- a crawl names one ---------------------------------------------------------------------------


def test_add_and_schedule_take_a_persona_and_refuse_an_unknown_one() -> None:
    persona_save(name="reader", cookies=COOKIES_TXT)
    out = io.StringIO()

    call_command("add", "--persona", "reader", "https://example.com/", stdout=out)
    call_command("schedule", "add", "0 * * * *", "https://example.org/", "--persona", "reader",
                 stdout=out)  # fmt: skip
    with pytest.raises(CommandError, match="unknown persona 'nobody' \\(personas: reader\\)"):
        call_command("add", "--persona", "nobody", "https://example.net/", stdout=out)

    assert Crawl.objects.get().persona.name == "reader"
    assert CrawlSchedule.objects.get().persona.name == "reader"


def test_the_add_page_and_the_api_take_a_persona_and_show_only_its_name() -> None:
    persona_save(name="reader", cookies=COOKIES_TXT)
    client = Client()
    client.force_login(staff_with("adder", "crawls.add_crawl", "crawls.view_crawl"))

    client.post("/add/", {"urls": "https://example.com/", "parser": "auto", "depth": 0,
                          "persona": "reader"})  # fmt: skip
    made = client.post("/api/v1/crawls", {"urls": ["https://example.org/"], "persona": "reader"},
                       content_type="application/json")  # fmt: skip
    listed = client.get("/api/v1/crawls")

    assert made.status_code == 201 and made.json()["persona"] == "reader"
    assert [c.persona.name for c in Crawl.objects.all()] == ["reader", "reader"]
    assert VALUE not in listed.content.decode()


def test_removing_a_persona_leaves_its_crawls() -> None:
    persona_save(name="reader", cookies=COOKIES_TXT)
    crawl = crawl_create(
        data=b"https://example.com/\n",
        source_name="urls.txt",
        options=CrawlOptions(persona="reader"),
    )

    persona_remove(name="reader")

    crawl.refresh_from_db()
    assert crawl.persona is None


def test_the_admin_takes_secrets_but_never_shows_them(tmp_path: Path) -> None:
    client = Client()
    client.force_login(staff_with("keeper", "crawls.add_persona", "crawls.change_persona",
                                  "crawls.view_persona"))  # fmt: skip
    upload = io.BytesIO(COOKIES_TXT.encode())
    upload.name = "cookies.txt"

    client.post("/admin/crawls/persona/add/", {"name": "reader", "description": "",
                "user_agent": "", "cookies": upload, "headers": "X-Api-Key: k-12345"})  # fmt: skip
    persona = Persona.objects.get(name="reader")
    page = client.get(f"/admin/crawls/persona/{persona.pk}/change/").content.decode()
    bad = client.post(f"/admin/crawls/persona/{persona.pk}/change/", {"name": "reader",
                      "description": "", "user_agent": "", "headers": "no colon"})  # fmt: skip

    assert persona.summary() == "2 cookies, 1 headers (for example.com)"
    assert "2 cookies, 1 headers (for example.com)" in page
    assert VALUE not in page and "k-12345" not in page and persona.secrets not in page
    assert bad.status_code == 200 and "A header is" in bad.content.decode()


# --- what the tools are given --------------------------------------------------------------------


def held() -> Credentials:
    return Credentials(cookies=parse_cookies(COOKIES_TXT), headers={"X-Api-Key": "k-12345"})


def test_the_cookie_file_is_private_and_removed_after() -> None:
    with cookies_file(held()) as path:
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f"sid\t{VALUE}" in path.read_text() and "#HttpOnly_" not in path.read_text()
    assert not path.exists()


def make_unremovable(path: Path) -> None:
    """Make ``path`` (a file in a folder) impossible to delete: its folder read-only, or for
    root, whom permissions do not stop, the file immutable (chattr +i, ext4 and the like)."""
    if os.geteuid() != 0:
        path.parent.chmod(0o500)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i refused here: {made.stderr.decode().strip()}")


def make_removable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.parent.chmod(0o700)


def test_a_cookie_file_that_cannot_be_removed_is_named_in_a_warning(caplog) -> None:
    """A plaintext cookie file left behind is never silent, and the run's own result (here
    the value the block returns) is not replaced by an error."""
    caplog.set_level(logging.WARNING, logger="core.extractors.credentials")
    try:
        with cookies_file(held()) as path:
            make_unremovable(path)
            outcome = "the tool's result"
        assert outcome == "the tool's result"
        assert path.exists()  # left: and said so
        (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert str(path.parent) in warning.getMessage()
        assert "persona secrets left on disk" in warning.getMessage()
    finally:
        make_removable(path)
        shutil.rmtree(path.parent)


def test_the_tools_get_headers_from_private_files_not_their_command_line() -> None:
    media = MediaExtractor(held())
    with persona_files(held()) as files:
        cmd = media.command("yt-dlp", "https://example.com/v", files)
        config = files.ytdlp_config.read_text()
        wgetrc = files.wgetrc.read_text()
        curl_headers = files.headers.read_text()
        modes = {stat.S_IMODE(p.stat().st_mode) for p in files.folder.iterdir()}
    assert cmd[cmd.index("--cookies") + 1] == str(files.cookies)
    assert cmd[cmd.index("--config-locations") + 1] == str(files.ytdlp_config)
    assert "k-12345" not in " ".join(cmd)
    assert (config, wgetrc, curl_headers) == (
        "--add-headers X-Api-Key:k-12345\n",
        "header = X-Api-Key: k-12345\n",
        "X-Api-Key: k-12345\n",
    )
    assert modes == {0o600} and not files.folder.exists()
    assert persona_arguments(None, "curl") == []


def test_a_header_with_a_line_break_is_refused_before_it_reaches_a_file() -> None:
    bad = Credentials(headers={"X-A": "1\nuse_proxy = off"})
    with pytest.raises(ValueError, match="line break"), persona_files(bad):
        pass
    with pytest.raises(InputError, match="line break"):
        persona_save(name="reader", headers=["X-A: 1\nuse_proxy = off"])


def test_git_gets_the_persona_through_its_environment(tmp_path: Path) -> None:
    env = persona_config(held(), tmp_path / "cookies.txt")

    assert env == {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "http.cookieFile",
        "GIT_CONFIG_VALUE_0": str(tmp_path / "cookies.txt"),
        "GIT_CONFIG_KEY_1": "http.extraHeader",
        "GIT_CONFIG_VALUE_1": "X-Api-Key: k-12345",
    }
    git = GitExtractor(held())
    assert "k-12345" not in " ".join(git.command("git", "https://example.com/r.git", "r.git"))


# --- the WARC's request records ------------------------------------------------------------------


def request_warc(path: Path) -> Path:
    """A WARC holding one request record that sent the persona's cookie."""
    with open(path, "wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        headers = StatusAndHeaders(
            "GET / HTTP/1.1",
            [("Host", "example.com"), ("Cookie", f"sid={VALUE}")],
            is_http_request=True,
        )
        writer.write_record(
            writer.create_warc_record("https://example.com/", "request", http_headers=headers)
        )
    return path


@pytest.mark.parametrize("keep", [False, True])
def test_the_persona_chooses_whether_its_cookie_stays_in_request_records(
    tmp_path: Path, keep: bool
) -> None:
    warc = request_warc(tmp_path / "archive.warc.gz")
    (tmp_path / "tool.log").write_text(f"sent sid={VALUE}\n")
    credentials = held()

    scrub_folder(tmp_path, [], secrets=credentials.secrets(), headers=credentials.headers,
                 persona_in_warcs=keep)  # fmt: skip

    assert (VALUE.encode() in gzip.decompress(warc.read_bytes())) is keep
    assert VALUE not in (tmp_path / "tool.log").read_text()  # logs: always taken out
