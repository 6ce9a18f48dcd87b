"""Per-extractor options (EXTRACTOR_OPTIONS): parsing, start-up checks and their effect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from archive.env import env_cron, env_json_object, is_cron
from core.checks import check_extractor_options
from core.extractors.registry import get_extractor


def test_env_json_object_parses_an_object(monkeypatch) -> None:
    monkeypatch.setenv("VELLUM_TEST_OPTIONS", '{"wget": {"timeout": 120}}')

    assert env_json_object("VELLUM_TEST_OPTIONS", {}) == {"wget": {"timeout": 120}}


def test_env_json_object_default_when_unset_or_blank(monkeypatch) -> None:
    monkeypatch.delenv("VELLUM_TEST_OPTIONS", raising=False)
    assert env_json_object("VELLUM_TEST_OPTIONS", {"a": {}}) == {"a": {}}
    monkeypatch.setenv("VELLUM_TEST_OPTIONS", "  ")
    assert env_json_object("VELLUM_TEST_OPTIONS", {}) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{wget: 1}", "VELLUM_TEST_OPTIONS is not valid JSON"),
        ("[1, 2]", "VELLUM_TEST_OPTIONS must be a JSON object"),
    ],
)
def test_env_json_object_rejects_what_is_not_an_object(monkeypatch, raw, message) -> None:
    monkeypatch.setenv("VELLUM_TEST_OPTIONS", raw)

    with pytest.raises(ImproperlyConfigured, match=message):
        env_json_object("VELLUM_TEST_OPTIONS", {})


def test_valid_options_pass_the_check(settings) -> None:
    settings.EXTRACTOR_OPTIONS = {
        "wget": {"timeout": 120, "max_attempts": 5, "enabled": True, "arguments": ["--quota=5m"]},
        "title": {"enabled": False},
        "screenshot": {"user_agent": "Mozilla/5.0 (archiving)", "timeout": 30},
    }

    assert check_extractor_options(None) == []


@pytest.mark.parametrize(
    ("options", "error_id", "message"),
    [
        ({"wgte": {}}, "core.E001", "unknown extractor 'wgte'"),
        ({"wget": 5}, "core.E002", "EXTRACTOR_OPTIONS['wget'] must be an object"),
        ({"wget": {"timout": 5}}, "core.E003", "unknown key 'timout'"),
        ({"wget": {"timeout": 0}}, "core.E004", "must be an integer of at least 1, not 0"),
        ({"wget": {"max_attempts": "3"}}, "core.E004", "not '3'"),
        ({"wget": {"max_attempts": True}}, "core.E004", "not True"),
        ({"wget": {"enabled": "no"}}, "core.E005", "must be true or false, not 'no'"),
        ({"wget": {"user_agent": ""}}, "core.E006", "must be a non-empty string, not ''"),
        ({"git": {"user_agent": 7}}, "core.E006", "not 7"),
        ({"wget": {"arguments": "--mirror"}}, "core.E007", "must be a list of strings"),
        ({"curl": {}}, "core.E001", "unknown extractor 'curl'"),
        ({"title": {"arguments": ["-H", 5]}}, "core.E007", "not ['-H', 5]"),
        ({"screenshot": {"arguments": ["--x"]}}, "core.E008", "cannot set 'arguments'"),
    ],
)
def test_bad_options_are_reported(settings, options, error_id, message) -> None:
    settings.EXTRACTOR_OPTIONS = options

    errors = check_extractor_options(None)

    assert [error.id for error in errors] == [error_id]
    assert message in errors[0].msg


@pytest.mark.parametrize(
    ("name", "arguments", "spelled"),
    [
        ("wget", ["--no-proxy"], "--no-proxy"),
        ("wget", ["--no-prox"], "--no-prox"),  # getopt_long takes a prefix
        ("wget", ["-e", "use_proxy=off"], "-e use_proxy"),
        ("wget", ["--execute=use_proxy=on"], "--execute use_proxy"),
        ("wget", ["-qeuse-proxy = no"], "-qe use-proxy"),
        ("wget", ["-e", "http_proxy=http://198.51.100.1:3128/"], "-e http_proxy"),
        ("wget", ["--execute", "HTTPS_PROXY=http://198.51.100.1:3128/"], "--execute HTTPS_PROXY"),
        ("wget", ["-e", "no_proxy=example.org"], "-e no_proxy"),
        ("wget", ["--config=/etc/other.wgetrc"], "--config"),
        ("headers", ["--noproxy", "*"], "--noproxy"),
        ("headers", ["--proxy", "http://198.51.100.1:3128/"], "--proxy"),
        ("title", ["-x", "http://198.51.100.1:3128/"], "-x"),
        ("favicon", ["-sLx", "http://198.51.100.1:3128/"], "-sLx"),
        ("readability", ["--proxy1.0", "198.51.100.1:3128"], "--proxy1.0"),
        ("outlinks", ["--socks5-hostname", "198.51.100.1:1080"], "--socks5-hostname"),
        ("htmltotext", ["--socks4a", "198.51.100.1:1080"], "--socks4a"),
        ("headers", ["--preproxy", "socks5://198.51.100.1"], "--preproxy"),
        ("headers", ["--unix-socket", "/run/docker.sock"], "--unix-socket"),
        ("headers", ["-K", "/etc/other.curlrc"], "-K"),
        ("media", ["--proxy", ""], "--proxy"),
        ("media", ["--proxy="], "--proxy"),
        ("media", ["--prox", "socks5://198.51.100.1"], "--prox"),  # optparse takes a prefix
        ("media", ["--geo-verification-proxy", "http://198.51.100.1/"], "--geo-verification-proxy"),
        ("git", ["-c", "http.proxy="], "-c http.proxy"),
        ("git", ["--config=HTTP.Proxy=http://198.51.100.1/"], "--config HTTP.Proxy"),
        ("git", ["-c", "http.https://example.org/.proxy=x"], "-c http.https://example.org/.proxy"),
        ("git", ["-c", "remote.origin.proxy=x"], "-c remote.origin.proxy"),
        ("git", ["-c", "include.path=/tmp/gitconfig"], "-c include.path"),
    ],
)
def test_arguments_that_go_around_the_egress_proxy_are_refused(
    settings, name: str, arguments: list[str], spelled: str
) -> None:
    settings.EXTRACTOR_OPTIONS = {name: {"arguments": ["--verbose", *arguments]}}

    (error,) = check_extractor_options(None)

    assert error.id == "core.E009"
    assert error.msg.startswith(f"EXTRACTOR_OPTIONS[{name!r}]['arguments'] cannot use {spelled}: ")
    assert "egress proxy" in error.msg
    assert "198.51.100.1" not in error.msg  # a proxy's URL may hold its password


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("wget", ["-e", "robots=off", "--proxy-user=alice", "--proxy-password=pw", "--no-parent"]),
        ("wget", ["-Oe", "use_proxy=off"]),  # -O takes "e" as its file name
        ("headers", ["--proxy-header", "X-Trace: 1", "--proxy-insecure", "--head"]),
        ("media", ["--add-headers", "X-A:b", "--ignore-config"]),
        ("git", ["-c", "http.proxyAuthMethod=basic", "-c", "http.extraHeader=X-A: b"]),
    ],
)
def test_arguments_that_keep_the_proxy_pass(settings, name: str, arguments: list[str]) -> None:
    settings.EXTRACTOR_OPTIONS = {name: {"arguments": arguments}}

    assert check_extractor_options(None) == []


def test_a_command_refuses_to_start_with_an_argument_that_switches_the_proxy_off() -> None:
    completed = manage("status", EXTRACTOR_OPTIONS='{"wget": {"arguments": ["--no-proxy"]}}')

    assert completed.returncode == 1
    assert "core.E009" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_options_set_an_extractors_timeout_and_attempts(settings) -> None:
    settings.EXTRACTOR_TIMEOUT = 60
    settings.MAX_ATTEMPTS = 3
    settings.EXTRACTOR_OPTIONS = {"wget": {"timeout": 120, "max_attempts": 5}}

    wget, title = get_extractor("wget"), get_extractor("title")

    assert (wget.timeout, wget.max_attempts) == (120, 5)
    assert (title.timeout, title.max_attempts) == (60, 3)


def manage(*args: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(django_settings.BASE_DIR / "manage.py"), *args],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "command", [["status"], ["add", "https://a.example/"], ["orchestrator", "--exit-on-idle"]]
)
def test_a_command_refuses_to_start_with_bad_options(command) -> None:
    completed = manage(*command, EXTRACTOR_OPTIONS='{"wget": {"timeout": -1}}')

    assert completed.returncode == 1
    assert "core.E004" in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("raw", ["61 3 * * *", "30 3 * *", "every night", "30 3 * * * *"])
def test_env_cron_rejects_what_is_not_five_cron_fields(monkeypatch, raw) -> None:
    monkeypatch.setenv("VELLUM_TEST_CRON", raw)
    with pytest.raises(ImproperlyConfigured, match="VELLUM_TEST_CRON"):
        env_cron("VELLUM_TEST_CRON", "0 * * * *")


def test_env_cron_reads_an_expression_or_the_default(monkeypatch) -> None:
    assert env_cron("VELLUM_TEST_CRON", "30 3 * * *") == "30 3 * * *"
    monkeypatch.setenv("VELLUM_TEST_CRON", "*/15 2-4 * * 1-5")
    assert env_cron("VELLUM_TEST_CRON", "30 3 * * *") == "*/15 2-4 * * 1-5"


def test_an_unset_cron_variable_gives_its_default_and_the_audit_default_is_cron() -> None:
    """A default is taken unchecked (checking it imported croniter at every start-up)."""
    assert "FIXITY_AUDIT_CRON" not in os.environ
    assert env_cron("VELLUM_TEST_CRON", "not checked") == "not checked"
    assert is_cron(django_settings.FIXITY_AUDIT_CRON)


def test_a_command_refuses_to_start_with_a_bad_audit_cron() -> None:
    completed = manage("status", FIXITY_AUDIT_CRON="30 25 * * *")

    assert completed.returncode == 1
    assert "FIXITY_AUDIT_CRON" in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize(
    "command",
    [["status"], ["list"], ["add", "https://a.example/"], ["orchestrator", "--exit-on-idle"]],
)
def test_commands_on_a_data_dir_never_initialized_say_to_run_init(
    tmp_path: Path, command: list[str]
) -> None:
    completed = manage(*command, DATA_DIR=str(tmp_path / "fresh"))

    assert completed.returncode == 1
    assert "run `python manage.py init` first" in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.django_db
def test_a_migration_the_database_does_not_record_is_found_without_the_fast_path() -> None:
    from django.core.management.base import CommandError
    from django.db.migrations.recorder import MigrationRecorder

    from core.management.database import _every_migration_recorded, require_migrated_database

    assert _every_migration_recorded()
    require_migrated_database()  # the test database is migrated

    latest = MigrationRecorder.Migration.objects.filter(app="core").order_by("-name").first()
    latest.delete()

    assert not _every_migration_recorded()
    unapplied = r"\(1 migrations to apply\): run `python manage.py init`"
    with pytest.raises(CommandError, match=unapplied):
        require_migrated_database()


def test_missing_confinement_tools_are_a_warning(monkeypatch) -> None:
    from core.checks import check_tool_confinement
    from core.extractors import process

    assert check_tool_confinement(None) == []  # util-linux is installed here
    monkeypatch.setattr(process, "PRLIMIT", None)

    (warning,) = check_tool_confinement(None)

    assert warning.id == "core.W001"
    assert warning.msg.startswith("prlimit not found (util-linux)")
