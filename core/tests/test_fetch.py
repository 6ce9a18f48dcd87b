"""fetch() and run_command(): what every curl-based extractor stands on."""

from __future__ import annotations

import sys
from pathlib import Path

from core.extractors.errors import Outcome
from core.extractors.fetch import download_limit, fetch, header
from core.extractors.process import run_command
from core.tests.site import LARGE_FILE_BYTES, RETRY_AFTER_SECONDS, LiveSite


def test_fetch_without_a_kept_dump_still_reads_the_final_headers(
    live_site: LiveSite, tmp_path: Path
) -> None:
    result = fetch(
        live_site.url("/server-error"),
        body_path=tmp_path / "body",
        headers_path=None,
        log_path=tmp_path / "curl.log",
        timeout=10,
    )

    assert result.outcome is Outcome.TEMPORARY
    assert result.retry_after == RETRY_AFTER_SECONDS
    assert "Retry-After" in result.headers
    assert sorted(p.name for p in tmp_path.iterdir()) == ["body", "curl.log"]  # no dump left


def test_fetch_keeps_the_dump_when_asked(live_site: LiveSite, tmp_path: Path) -> None:
    result = fetch(
        live_site.url("/redirect"),
        body_path=tmp_path / "body",
        headers_path=tmp_path / "headers.txt",
        log_path=tmp_path / "curl.log",
        timeout=10,
    )

    assert result.outcome is Outcome.SUCCEEDED
    dump = (tmp_path / "headers.txt").read_text().splitlines()
    status_lines = [line for line in dump if line.startswith("HTTP/")]
    assert [line.split()[1] for line in status_lines] == ["302", "200"]
    assert header(result.headers, "content-type").startswith("text/html")  # the final one only
    assert header(result.headers, "location") == ""


def test_run_command_captures_more_stdout_than_a_pipe_holds(tmp_path: Path) -> None:
    size = 200_000  # over the 64 KiB a pipe buffers
    done = run_command(
        [sys.executable, "-c", f"import sys; sys.stdout.write('x' * {size})"],
        cwd=tmp_path,
        timeout=20,
        log_path=tmp_path / "cmd.log",
        capture_stdout=True,
    )

    assert not done.timed_out
    assert done.exit_code == 0
    assert len(done.stdout) == size


def test_download_limit_bounds_each_file_and_twice_that_in_all(settings, tmp_path: Path) -> None:
    settings.MAX_DOWNLOAD_BYTES = 5000

    limit = download_limit(tmp_path)

    assert (limit.folder, limit.file_bytes, limit.total_bytes) == (tmp_path, 5000, 10000)


def test_a_body_within_max_download_bytes_is_kept_whole(
    live_site: LiveSite, tmp_path: Path, settings
) -> None:
    settings.MAX_DOWNLOAD_BYTES = LARGE_FILE_BYTES  # exactly at the limit is still allowed

    result = fetch(
        live_site.url("/large.bin"),
        body_path=tmp_path / "body",
        headers_path=None,
        log_path=tmp_path / "curl.log",
        timeout=10,
    )

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert (tmp_path / "body").stat().st_size == LARGE_FILE_BYTES
