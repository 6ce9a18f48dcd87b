"""The git extractor against real bare repositories served over local HTTP (dumb and smart
protocols, core/tests/git_site.py), with the real git."""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from archive.testing import unused_port
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome, too_large_reason
from core.extractors.git import (
    GitExtractor,
    classify_git_failure,
    is_ref_advertisement,
    looks_like_repository,
    mirror_name,
)
from core.tests.git_site import README, GitSite, build_repositories, git
from core.tests.site import LiveSite

SHA = "e0f9cacae7ac094c50ae842289c1a77e93812dda"


@pytest.fixture(scope="module")
def git_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitSite]:
    root = tmp_path_factory.mktemp("git-site")
    site = GitSite(root)
    build_repositories(root, tmp_path_factory.mktemp("git-work"))
    site.start()
    yield site
    site.stop()


def run(url: str, out_dir: Path) -> ExtractorOutput:
    return GitExtractor().run(SimpleNamespace(url=url), out_dir)


def checkout(mirror: Path, into: Path) -> Path:
    """Clone a working tree from the mirror folder, as someone reading the archive would."""
    git("clone", "--quiet", mirror, into)
    return into


def refs(repository: Path) -> str:
    return git("for-each-ref", "--format=%(objectname) %(refname)", cwd=repository)


# --- cloning -------------------------------------------------------------------------------------


def test_a_dot_git_url_is_mirrored_with_every_ref(
    git_site: GitSite, out_dir: Path, tmp_path: Path
) -> None:
    output = run(git_site.url("/project.git"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "project.git"
    assert Path(output.cmd[0]).name == "git"
    assert output.cmd[-3:] == ["--", git_site.url("/project.git"), "project.git"]
    assert output.cmd_version.startswith("git version ")
    assert output.exit_code == 0
    # Cloned at once on the URL's form: no probe, so no curl log beside git's.
    assert sorted(path.name for path in out_dir.iterdir()) == ["git.log", "project.git"]
    mirror = out_dir / "project.git"
    assert refs(mirror) == refs(git_site.root / "project.git")
    assert "refs/heads/other" in refs(mirror) and "refs/tags/v1.0" in refs(mirror)
    tree = checkout(mirror, tmp_path / "checkout")
    assert (tree / "README.md").read_text(encoding="utf-8") == README


def test_a_url_without_dot_git_is_found_by_its_info_refs(
    git_site: GitSite, out_dir: Path, tmp_path: Path
) -> None:
    git_site.requests.clear()

    output = run(git_site.url("/project"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "project.git"
    assert (out_dir / "curl.log").read_text().startswith("$ ")  # the probe ran curl
    assert not (out_dir / ".git-probe").exists()  # and its body was removed
    assert git_site.requests[0][:2] == ("GET", "/project/info/refs?service=git-upload-pack")
    tree = checkout(out_dir / "project.git", tmp_path / "checkout")
    assert (tree / "README.md").read_text(encoding="utf-8") == README


def test_a_smart_http_server_is_found_and_cloned(
    git_site: GitSite, out_dir: Path, tmp_path: Path
) -> None:
    git_site.requests.clear()

    output = run(git_site.url("/smart/project"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    # The smart protocol's pack request, which a dumb server never receives.
    assert ("POST", "/smart/project/git-upload-pack") in [r[:2] for r in git_site.requests]
    tree = checkout(out_dir / "project.git", tmp_path / "checkout")
    assert (tree / "README.md").read_text(encoding="utf-8") == README


def test_an_empty_repository_is_skipped(git_site: GitSite, out_dir: Path) -> None:
    output = run(git_site.url("/empty.git"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == f"git: {git_site.url('/empty.git')} is an empty repository"


# --- not a repository ----------------------------------------------------------------------------


def test_an_html_page_is_skipped_after_one_request(live_site: LiveSite, out_dir: Path) -> None:
    output = run(live_site.url("/page2.html"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "not a git repository (no info/refs: HTTP 404)"
    assert Path(output.cmd[0]).name == "curl"
    assert output.cmd[-1] == live_site.url("/page2.html/info/refs?service=git-upload-pack")
    assert [path.name for path in out_dir.iterdir()] == ["curl.log"]  # git never ran


def test_an_info_refs_that_is_not_a_ref_list_is_skipped(git_site: GitSite, out_dir: Path) -> None:
    output = run(git_site.url("/lookalike"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "not a git repository (info/refs is not a ref list)"
    assert not (out_dir / "git.log").exists()


def test_a_missing_dot_git_repository_is_fatal(git_site: GitSite, out_dir: Path) -> None:
    url = git_site.url("/missing.git")

    output = run(url, out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.error == f"git: no repository at {url}"
    assert output.exit_code == 128
    assert "not found" in (out_dir / "git.log").read_text()


def test_credentials_are_never_asked_for(
    git_site: GitSite, out_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An askpass program in the environment would be git's first way to ask: it must not run.
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\ntouch {asked}\necho secret\n")
    askpass.chmod(askpass.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("GIT_ASKPASS", str(askpass))
    monkeypatch.setenv("SSH_ASKPASS", str(askpass))
    url = git_site.url("/private.git")

    output = run(url, out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.error == f"git: {url} asks for credentials (private or missing repository)"
    assert "terminal prompts disabled" in (out_dir / "git.log").read_text()
    assert not asked.exists()


def test_a_refused_connection_is_temporary(out_dir: Path) -> None:
    output = run(f"http://127.0.0.1:{unused_port()}/project.git", out_dir)

    # git asks the egress proxy, which could not connect: the error says what it met.
    assert output.outcome is Outcome.TEMPORARY
    assert output.error.startswith("network error: ")
    assert "Connection refused" in output.error


def test_a_refused_probe_is_temporary(out_dir: Path) -> None:
    output = run(f"http://127.0.0.1:{unused_port()}/project", out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert output.error.startswith("network error: ")
    assert output.error.endswith(": Connection refused")
    assert not (out_dir / "git.log").exists()


def test_a_busy_server_is_asked_again_later(git_site: GitSite, out_dir: Path) -> None:
    # A forge behind a proxy that answers 503: this may well be a repository, so retry.
    output = run(git_site.url("/busy/project"), out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert output.error == (
        f"HTTP 503 from {git_site.url('/busy/project/info/refs?service=git-upload-pack')}"
    )
    assert output.retry_after == 120


def test_a_stalled_server_times_out(git_site: GitSite, out_dir: Path, settings) -> None:
    settings.EXTRACTOR_OPTIONS = {"git": {"timeout": 1}}
    started = time.monotonic()

    output = run(git_site.url("/stall.git"), out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert output.error == "git timed out after 1 s"
    assert output.exit_code is None
    assert time.monotonic() - started < 5


def test_a_repository_over_max_download_bytes_is_too_large(
    git_site: GitSite, out_dir: Path, settings
) -> None:
    settings.MAX_DOWNLOAD_BYTES = 64 * 1024  # the repository holds 300 KB of random bytes

    output = run(git_site.url("/big.git"), out_dir)

    assert (output.outcome, output.error) == too_large_reason(64 * 1024)
    assert not (out_dir / "big.git").exists()


# --- options and binaries ------------------------------------------------------------------------


def test_the_user_agent_option_reaches_the_server(
    git_site: GitSite, out_dir: Path, settings
) -> None:
    settings.EXTRACTOR_OPTIONS = {"git": {"user_agent": "VellumGitTest/1.0"}}
    git_site.requests.clear()

    output = run(git_site.url("/project"), out_dir)  # the probe (curl), then the clone (git)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    paths = [path for _, path, _ in git_site.requests]
    assert "/project/info/refs?service=git-upload-pack" in paths
    assert any(path.startswith("/project/objects/") for path in paths)
    assert {agent for _, _, agent in git_site.requests} == {"VellumGitTest/1.0"}


def test_the_arguments_option_is_passed_to_git_clone(
    git_site: GitSite, out_dir: Path, settings
) -> None:
    settings.EXTRACTOR_OPTIONS = {"git": {"arguments": ["--config", "vellum.marker=yes"]}}

    output = run(git_site.url("/project.git"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.cmd[-5:-3] == ["--config", "vellum.marker=yes"]
    assert git("config", "vellum.marker", cwd=out_dir / "project.git").strip() == "yes"


def test_the_users_git_configuration_cannot_set_a_proxy(
    git_site: GitSite, out_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    # A ~/.gitconfig that would send git to a proxy that is not there, around the egress proxy.
    (tmp_path / ".gitconfig").write_text(f"[http]\n\tproxy = http://127.0.0.1:{unused_port()}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "127.0.0.1" in git("config", "--global", "http.proxy")  # git reads it here

    output = run(git_site.url("/project.git"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert refs(out_dir / "project.git") == refs(git_site.root / "project.git")


def test_without_git_the_extractor_is_skipped(
    out_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    snapshot = SimpleNamespace(url="https://github.com/psf/requests")

    assert GitExtractor().should_run(snapshot) == (False, "git not found")
    output = GitExtractor().run(snapshot, out_dir)
    assert (output.outcome, output.error) == (Outcome.SKIPPED, "git not found")


@pytest.mark.parametrize("url", ["file:///srv/repo.git", "ftp://example.org/repo.git", "x"])
def test_only_http_urls_are_cloned(url: str, out_dir: Path) -> None:
    snapshot = SimpleNamespace(url=url)

    assert GitExtractor().should_run(snapshot) == (False, "not an http(s) URL")
    output = GitExtractor().run(snapshot, out_dir)
    assert (output.outcome, output.error) == (Outcome.SKIPPED, "not an http(s) URL")
    assert list(out_dir.iterdir()) == []


# --- recognising a repository without the network ------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/project.git",
        "https://example.org/project.git/",
        "http://127.0.0.1:8000/a/b/project.git?x=1#top",
        "https://github.com/psf/requests",
        "https://github.com/psf/requests/",
        "https://www.github.com/psf/requests",
        "https://GitHub.com/psf/requests.py",
        "https://gitlab.com/gitlab-org/gitlab",
        "https://codeberg.org/forgejo/forgejo",
        "https://bitbucket.org/atlassian/python-bitbucket",
        "https://github.com/psf/requests?tab=readme-ov-file#readme",
    ],
)
def test_repository_urls_are_recognised(url: str) -> None:
    assert looks_like_repository(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/",
        "https://example.org/project",
        "https://example.org/project.git.html",
        "https://github.com/",
        "https://github.com/psf",
        "https://github.com/psf/requests/issues",
        "https://github.com/psf/requests/tree/main/docs",
        "https://github.com/features/actions",
        "https://github.com/orgs/python",
        "https://gitlab.com/explore/projects",
        "https://notgithub.com/psf/requests",
        "https://github.com.evil.example/psf/requests",
        "file:///srv/project.git",
        "ssh://git@example.org/project.git",
    ],
)
def test_other_urls_are_not_recognised(url: str) -> None:
    assert not looks_like_repository(url)


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/x-git-upload-pack-advertisement", b"001e# service=git-upload-pack\n", True),
        ("text/plain", f"{SHA}\trefs/heads/main\n{SHA}\trefs/tags/v1^{{}}\n".encode(), True),
        ("application/octet-stream", f"{'ab' * 32}\trefs/heads/main\n".encode(), True),  # SHA-256
        ("text/html", b"<!doctype html><title>refs</title>\n", False),
        ("text/plain", b"", False),
        ("text/plain", f"{SHA}\tHEAD\n".encode(), False),
        ("text/plain", f"{SHA} refs/heads/main\n".encode(), False),  # a space, not a tab
        ("text/plain", f"{SHA}\trefs/heads/main\n<html>\n".encode(), False),
    ],
)
def test_ref_advertisements_are_told_apart(content_type: str, body: bytes, expected: bool) -> None:
    assert is_ref_advertisement(content_type, body) is expected


def test_a_ref_list_cut_short_by_the_read_limit_still_counts() -> None:
    line = f"{SHA}\trefs/heads/branch-0000\n".encode()
    body = (line * 2000)[: 64 * 1024]  # ends in the middle of a line

    assert is_ref_advertisement("text/plain", body)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/psf/requests", "requests.git"),
        ("https://example.org/x/project.git/", "project.git"),
        ("https://example.org/", "repository.git"),
        ("https://example.org/..git", "repository.git"),
        ("https://example.org/caf%C3%A9 x", "caf_C3_A9_x.git"),
    ],
)
def test_mirror_names(url: str, name: str) -> None:
    assert mirror_name(url) == name


@pytest.mark.parametrize(
    ("log", "outcome", "error"),
    [
        (
            "fatal: unable to access 'U/': The requested URL returned error: 503\n",
            Outcome.TEMPORARY,
            "git: HTTP 503 from U",
        ),
        (
            "fatal: unable to access 'U/': The requested URL returned error: 403\n",
            Outcome.FATAL,
            "git: HTTP 403 from U",
        ),
        (
            "fatal: unable to access 'U/': Could not resolve host: nowhere.invalid\n",
            Outcome.TEMPORARY,
            "git: network error: unable to access 'U/': Could not resolve host: nowhere.invalid",
        ),
        (
            "remote: Invalid username or password.\nfatal: Authentication failed for 'U/'\n",
            Outcome.FATAL,
            "git: U asks for credentials (private or missing repository)",
        ),
        (
            "fatal: U/info/refs not valid: is this a git repository?\n",
            Outcome.FATAL,
            "git: no repository at U",
        ),
        (
            "error: something odd\nfatal: the odd thing\n",
            Outcome.FATAL,
            "git clone failed (exit 128): the odd thing",
        ),
    ],
)
def test_clone_failures_are_classified_by_git_log(log: str, outcome: Outcome, error: str) -> None:
    assert classify_git_failure(128, log, "U") == (outcome, error)
