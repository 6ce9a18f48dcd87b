"""``manage.py verify`` and ``manage.py restore`` (core/management/commands/), as a person runs
them: what they print, and how they exit.

Snapshots are sealed by the real finalizing path (core/tests/test_fixity.py builds them) and then
damaged in each of the ways test_fixity.py lists. Most runs are in process (``call_command``);
the exit code and the absence of a traceback are checked by running ``manage.py`` as a
subprocess against the test database (hence ``transaction=True`` there) and this test's
DATA_DIR.
"""

from __future__ import annotations

import json
import shutil
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from model_bakery import baker

from archive.testing import MotoS3Server, files_in
from core.choices import CopyStatus, FixityOutcome, SnapshotStatus
from core.models import FixityCheck, Snapshot, StorageCopy
from core.models.preservation import LOCAL
from core.services.results import result_tick
from core.services.snapshots import snapshot_check_results
from core.tests.test_cli import manage
from core.tests.test_fixity import (
    CORRUPTIONS,
    FILE_SYSTEM,
    PAGE,
    TITLE,
    WARC,
    Corruption,
    assert_problems,
    copy_queued,
    flip_byte,
    sealed_snapshot,
    truncate,
    use_own_data_dir,
)
from core.tests.test_services import make_result, make_snapshot
from core.tests.test_storage import use_targets

pytestmark = pytest.mark.django_db

FLAGGED_ERROR = "manage.py restore --snapshot ID repairs one from a sound copy"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    return use_own_data_dir(settings, tmp_path)


def verify(*args: str) -> str:
    """Run ``manage.py verify`` in process; return what it printed (it must not fail)."""
    out = StringIO()
    call_command("verify", *args, stdout=out)
    return out.getvalue()


def verify_failing(*args: str) -> tuple[CommandError, str]:
    """Run ``manage.py verify``, which must fail; return its error and what it printed."""
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("verify", *args, stdout=out)
    return caught.value, out.getvalue()


def restore(*args: str) -> tuple[str, str]:
    """Run ``manage.py restore`` in process; return (stdout, stderr)."""
    out, err = StringIO(), StringIO()
    call_command("restore", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# --- verify: sound and damaged snapshots ---------------------------------------------------------


def test_a_clean_snapshot_verifies() -> None:
    snapshot = sealed_snapshot()

    out = verify("--snapshot", str(snapshot.pk))

    assert out == "Verified 1 snapshot (1 copy): 1 sound, 0 flagged\n"
    [check] = FixityCheck.objects.filter(snapshot=snapshot)
    assert (check.location, check.outcome, check.problems) == (LOCAL, FixityOutcome.OK, [])


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=str)
def test_verify_detects_each_corruption(settings, corruption: Corruption) -> None:
    settings.PACKAGE_WACZ = False  # one payload file more; fifteen cases need not build it
    snapshot = sealed_snapshot()
    corruption.damage(snapshot.output_dir)

    error, out = verify_failing("--snapshot", str(snapshot.pk))

    assert error.returncode == 1
    assert str(error) == f"1 of 1 snapshots flagged; {FLAGGED_ERROR}"
    first, *problems, summary = out.splitlines()
    assert first == f"FLAGGED {snapshot.pk} {snapshot.url}"
    assert all(line.startswith("    local: ") for line in problems), problems
    assert_problems([line.removeprefix("    local: ") for line in problems], corruption.problems)
    assert summary == "Verified 1 snapshot (1 copy): 0 sound, 1 flagged"
    assert list(Snapshot.objects.flagged()) == [snapshot]


def test_verify_checks_a_page_archived_with_wget(live_site) -> None:
    snapshot = make_snapshot(live_site.url("/page2.html"))
    for extractor in ("wget", "title"):
        result_tick(result=make_result(snapshot, extractor))
    snapshot_check_results(snapshot=Snapshot.objects.get(pk=snapshot.pk))
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    [warc] = [p for p in snapshot.output_dir.rglob("*.warc.gz") if "wget" in p.parts]

    assert verify("--snapshot", str(snapshot.pk)).endswith(": 1 sound, 0 flagged\n")

    truncate(warc)
    _error, out = verify_failing("--snapshot", str(snapshot.pk))

    relative = warc.relative_to(snapshot.output_dir).as_posix()
    assert f"    local: checksum mismatch: {relative}\n" in out
    assert list(Snapshot.objects.flagged()) == [snapshot]


def test_verify_all_reports_each_snapshot(settings) -> None:
    settings.PACKAGE_WACZ = False
    sound, damaged = sealed_snapshot("http://a.example/"), sealed_snapshot("http://b.example/")
    make_snapshot(status=SnapshotStatus.STARTED)  # not sealed: not verified
    flip_byte(damaged.output_dir / WARC)

    error, out = verify_failing("--all")

    assert str(error) == f"1 of 2 snapshots flagged; {FLAGGED_ERROR}"
    assert out.splitlines() == [
        f"FLAGGED {damaged.pk} http://b.example/",
        f"    local: checksum mismatch: {WARC}",
        "Verified 2 snapshots (2 copies): 1 sound, 1 flagged",
    ]
    assert list(Snapshot.objects.flagged()) == [damaged]
    assert FixityCheck.objects.filter(snapshot=sound, outcome=FixityOutcome.OK).count() == 1


def test_verify_crawl_checks_only_that_crawl(settings) -> None:
    settings.PACKAGE_WACZ = False
    mine, other = sealed_snapshot("http://a.example/"), sealed_snapshot("http://b.example/")
    flip_byte(other.output_dir / PAGE)

    out = verify("--crawl", str(mine.crawl_id))

    assert out == "Verified 1 snapshot (1 copy): 1 sound, 0 flagged\n"
    assert not other.fixity_checks.exists()


def test_verify_json_lists_every_check() -> None:
    snapshot = sealed_snapshot()
    (snapshot.output_dir / TITLE).unlink()

    _error, out = verify_failing("--snapshot", str(snapshot.pk), "--json")

    assert json.loads(out) == {
        "flagged": 1,
        "snapshots": [
            {
                "id": str(snapshot.pk),
                "url": snapshot.url,
                "flagged": True,
                "checks": [
                    {
                        "location": "local",
                        "outcome": "flagged",
                        "files": 5,
                        "problems": [f"missing: {TITLE}"],
                    }
                ],
            }
        ],
    }


# --- verify and storage copies -------------------------------------------------------------------


@pytest.fixture
def mirror(settings, tmp_path: Path) -> Path:
    """A mirror folder beside the archive as the only storage target; return its location."""
    location = tmp_path / "mirror"
    use_targets(settings, {"mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": location}}})
    return location


def stored_in_mirror() -> Snapshot:
    snapshot = sealed_snapshot()
    copy_queued(snapshot)
    assert StorageCopy.objects.get(snapshot=snapshot).status == CopyStatus.STORED
    return snapshot


def test_verify_checks_the_copies_unless_local_only(mirror: Path) -> None:
    snapshot = stored_in_mirror()
    flip_byte(mirror / str(snapshot.pk) / WARC)

    assert verify("--snapshot", str(snapshot.pk), "--local-only") == (
        "Verified 1 snapshot (1 copy): 1 sound, 0 flagged\n"
    )
    error, out = verify_failing("--snapshot", str(snapshot.pk))

    assert error.returncode == 1
    assert out.splitlines() == [
        f"FLAGGED {snapshot.pk} {snapshot.url}",
        f"    mirror: checksum mismatch: {WARC}",
        "Verified 1 snapshot (2 copies): 0 sound, 1 flagged",
    ]
    assert StorageCopy.objects.get(snapshot=snapshot).status == CopyStatus.DAMAGED


def test_verify_says_which_target_it_could_not_reach(settings) -> None:
    server = MotoS3Server().start()
    try:
        use_targets(settings, {"s3": server.storage_entry(server.create_bucket())})
        snapshot = sealed_snapshot()
        copy_queued(snapshot)
        assert StorageCopy.objects.get(snapshot=snapshot).status == CopyStatus.STORED
    finally:
        server.stop()

    out = verify("--snapshot", str(snapshot.pk))

    endpoint = f"http://127.0.0.1:{server.port}"
    assert out.splitlines() == [
        f"not checked {snapshot.pk} on s3: cannot connect to {endpoint} (connection refused)",
        "Verified 1 snapshot (2 copies): 1 sound, 0 flagged; not reachable: s3",
    ]
    assert not Snapshot.objects.flagged().exists()


# --- verify: bad arguments -----------------------------------------------------------------------


def test_verify_refuses_an_unknown_snapshot() -> None:
    unknown = uuid.uuid4()

    error, out = verify_failing("--snapshot", str(unknown))

    assert str(error) == f"no snapshot {unknown}"
    assert out == ""


def test_verify_refuses_a_malformed_snapshot_id() -> None:
    error, _out = verify_failing("--snapshot", "42")

    assert str(error) == "'42' is not a snapshot id (a UUID)"


def test_verify_refuses_a_snapshot_not_sealed() -> None:
    snapshot = make_snapshot(status=SnapshotStatus.STARTED)

    error, _out = verify_failing("--snapshot", str(snapshot.pk))

    assert str(error) == f"snapshot {snapshot.pk} is started: only sealed snapshots are signed"
    assert not FixityCheck.objects.exists()


def test_verify_refuses_an_unknown_crawl() -> None:
    error, _out = verify_failing("--crawl", "424242")

    assert str(error) == "no crawl 424242"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Error: one of the arguments --all --crawl --snapshot is required"),
        (("--all", "--crawl", "1"), "Error: argument --crawl: not allowed with argument --all"),
    ],
    ids=["no selection", "two selections"],
)
def test_verify_needs_exactly_one_selection(args: tuple[str, ...], message: str) -> None:
    error, _out = verify_failing(*args)

    assert str(error) == message


def test_verify_with_nothing_sealed_says_so() -> None:
    assert verify("--all") == "Verified 0 snapshots (0 copies): 0 sound, 0 flagged\n"


# --- verify as a subprocess: exit codes, no traceback --------------------------------------------


def run_manage(data_dir: Path, *args: str):
    return manage(*args, env={"DATA_DIR": str(data_dir), "STORAGE_TARGETS": "{}"})


@pytest.mark.django_db(transaction=True)
def test_verify_exits_0_when_sound_and_1_when_flagged(data_dir: Path) -> None:
    snapshot = sealed_snapshot()

    sound = run_manage(data_dir, "verify", "--snapshot", str(snapshot.pk))

    assert (sound.returncode, sound.stderr) == (0, "")
    assert sound.stdout == "Verified 1 snapshot (1 copy): 1 sound, 0 flagged\n"

    flip_byte(snapshot.output_dir / PAGE)
    flagged = run_manage(data_dir, "verify", "--snapshot", str(snapshot.pk))

    assert flagged.returncode == 1
    assert "Traceback" not in flagged.stderr
    # Before it, the audit's ERROR log line names the problem too (logging goes to stderr).
    assert flagged.stderr.splitlines()[-1] == (
        f"CommandError: 1 of 1 snapshots flagged; {FLAGGED_ERROR}"
    )
    assert f"    local: checksum mismatch: {PAGE}\n" in flagged.stdout
    assert list(Snapshot.objects.flagged()) == [snapshot]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("verify", "--snapshot", "42"), 1, "CommandError: '42' is not a snapshot id (a UUID)"),
        (("verify",), 2, "error: one of the arguments --all --crawl --snapshot is required"),
        (("restore", "--snapshot", "42"), 1, "CommandError: '42' is not a snapshot id (a UUID)"),
    ],
    ids=["verify bad id", "verify no selection", "restore bad id"],
)
def test_argument_errors_exit_without_a_traceback(data_dir, args, code, message) -> None:
    done = run_manage(data_dir, *args)

    assert done.returncode == code
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# --- restore -------------------------------------------------------------------------------------


def test_restore_of_a_sound_snapshot_does_nothing(mirror: Path, data_dir: Path) -> None:
    snapshot = stored_in_mirror()
    before = files_in(snapshot.output_dir)

    out, err = restore("--snapshot", str(snapshot.pk))

    assert (out, err) == (f"{snapshot.pk}: sound, nothing to do\n", "")
    assert files_in(snapshot.output_dir) == before
    assert not (data_dir / "quarantine").exists()


def test_restore_flagged_repairs_what_the_audit_flagged(mirror: Path, data_dir: Path) -> None:
    damaged, sound = stored_in_mirror(), stored_in_mirror()
    shutil.rmtree(damaged.output_dir / "wget")
    verify_failing("--all")

    out, err = restore("--flagged")

    assert (out, err) == (f"{damaged.pk}: restored the local folder from mirror\n", "")
    assert verify("--all") == "Verified 2 snapshots (4 copies): 2 sound, 0 flagged\n"
    kept = [path.name.rpartition("-")[0] for path in (data_dir / "quarantine").iterdir()]
    assert kept == [str(damaged.pk)]
    assert not sound.fixity_checks.filter(outcome=FixityOutcome.FLAGGED).exists()


def test_restore_flagged_with_nothing_flagged_says_so() -> None:
    sealed_snapshot()

    assert restore("--flagged") == ("Nothing to restore: no snapshot is flagged.\n", "")


def test_restore_from_a_target_without_a_copy_fails_readably(mirror: Path) -> None:
    snapshot = stored_in_mirror()
    (snapshot.output_dir / TITLE).unlink()
    err = StringIO()

    with pytest.raises(
        CommandError, match=r"^1 of 1 snapshots could not be restored; manage.py rearchive ID"
    ):
        call_command("restore", "--snapshot", str(snapshot.pk), "--from", "s3", stderr=err)

    assert err.getvalue() == (
        f"{snapshot.pk}: cannot restore: snapshot {snapshot.pk} has no stored copy on s3 to "
        "restore from\n"
    )
    assert not (snapshot.output_dir / TITLE).exists()


def test_restore_refuses_a_snapshot_not_sealed() -> None:
    snapshot = baker.make(Snapshot, status=SnapshotStatus.QUEUED, url="http://a.example/")

    with pytest.raises(CommandError, match="is queued: only sealed snapshots are signed"):
        restore("--snapshot", str(snapshot.pk))
