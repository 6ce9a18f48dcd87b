"""Profiles: the rules of their steps, the Profile model, ``add --profile``, ``manage.py
profile``, the admin, and each step behaviour run for real against the live test site."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse
from django_fsm import TransitionNotAllowed
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.registry import default_profile
from core.models import ArchiveResult, Snapshot
from core.models.results import STOPPED_PREFIX
from core.services.crawls import CrawlOptions, crawl_create
from core.services.profiles import profile_save
from core.services.rearchive import snapshot_retry_failed
from core.tests.site import LiveSite
from crawls.choices import CrawlStatus, StepBehaviour
from crawls.models import Crawl, Profile
from crawls.profiles import PlannedStep, default_steps, plan_steps
from crawls.seeds import InputError
from orchestrator.claims import claim_next
from orchestrator.work import work_types

pytestmark = pytest.mark.django_db

BLOCKING, NONBLOCKING, FINALLY = (
    StepBehaviour.BLOCKING,
    StepBehaviour.NONBLOCKING,
    StepBehaviour.FINALLY,
)


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.MAX_ATTEMPTS = 1
    settings.STORAGE_TARGETS = {}
    return tmp_path


def work_off(max_ticks: int = 200) -> int:
    """Claim and tick due crawls, snapshots and results in this process until none is due;
    return how many ticks ran."""
    kinds = [kind for name, kind in work_types().items() if name != "storagecopy"]
    ticks = 0
    while ticks < max_ticks:
        claimed = False
        for kind in kinds:
            record = claim_next(
                kind.model,
                lease_seconds=kind.lease_seconds,
                lease_fields=kind.lease_fields,
                related=kind.related,
            )
            if record is not None:
                kind.tick(record)
                ticks += 1
                claimed = True
        if not claimed:
            return ticks
    raise AssertionError(f"still work due after {max_ticks} ticks")


def results_of(snapshot: Snapshot) -> dict[str, ArchiveResult]:
    return {result.extractor: result for result in snapshot.results.all()}


# --- the rules of steps ------------------------------------------------------------------------


def test_a_bare_name_is_a_nonblocking_step_without_dependencies() -> None:
    assert plan_steps(["title", "headers"]) == [PlannedStep("title"), PlannedStep("headers")]


def test_an_extractors_own_dependency_is_added_when_the_profile_runs_it() -> None:
    with_dom = plan_steps(["dom", "readability"])
    without_dom = plan_steps(["readability"])

    assert with_dom[1].depends_on == ("dom",)
    assert without_dom[0].depends_on == ()


def test_every_step_after_a_blocking_one_waits_for_it() -> None:
    steps = plan_steps(
        [
            "headers",
            {"extractor": "wget", "behaviour": "blocking"},
            "title",
            {"extractor": "favicon", "behaviour": "finally", "depends_on": ["headers"]},
        ]
    )

    assert [(s.extractor, s.behaviour, s.depends_on) for s in steps] == [
        ("headers", NONBLOCKING, ()),
        ("wget", BLOCKING, ()),
        ("title", NONBLOCKING, ("wget",)),
        ("favicon", FINALLY, ("headers", "wget")),
    ]


def test_the_built_in_default_runs_every_extractor_nonblocking(settings) -> None:
    settings.EXTRACTORS = []
    steps = default_steps()

    assert [step.extractor for step in steps] == default_profile()
    assert {step.behaviour for step in steps} == {NONBLOCKING}


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], "a profile needs a list of at least one step"),
        ({"extractor": "title"}, "a profile needs a list of at least one step"),
        (["title", 3], "step 2: expected an extractor name or an object"),
        (["wgot"], "step 1: unknown extractor 'wgot' (known: headers, wget,"),
        (["title", "title"], "step 2: 'title' is listed twice"),
        ([{"extractor": "title", "behaviour": "soft"}], "behaviour 'soft' is not one of"),
        ([{"extractor": "title", "after": "dom"}], "step 1: unknown key(s) after"),
        ([{"behaviour": "blocking"}], "step 1: 'extractor' must name an extractor"),
        ([{"extractor": "title", "depends_on": [1]}], "'depends_on' must be a list"),
        (
            ["title", {"extractor": "readability", "depends_on": ["dom"]}],
            "step 2: 'readability' depends on 'dom', which this profile does not run",
        ),
        ([{"extractor": "dom", "depends_on": "dom"}], "'dom' cannot depend on itself"),
        (
            [
                {"extractor": "wget", "depends_on": ["title"]},
                {"extractor": "title", "depends_on": ["wget"]},
            ],
            "dependency cycle: wget → title → wget",
        ),
        (
            [{"extractor": "title", "behaviour": "blocking", "depends_on": ["wget"]}, "wget"],
            "dependency cycle: title → wget → title (a step also waits for every blocking",
        ),
    ],
)
def test_invalid_steps_are_refused_with_a_clear_error(steps, message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        plan_steps(steps)

    assert message in refused.value.messages[0]


# --- the model, crawls naming profiles ---------------------------------------------------------


def test_a_profile_with_invalid_steps_does_not_validate() -> None:
    profile = Profile(name="broken", steps=["title", "nope"])

    with pytest.raises(ValidationError) as refused:
        profile.full_clean()

    assert "step 2: unknown extractor 'nope'" in refused.value.message_dict["steps"][0]


def test_making_a_profile_the_default_unmarks_the_earlier_one() -> None:
    first = profile_save(name="first", steps=["title"], is_default=True)
    second = profile_save(name="second", steps=["headers"], is_default=True)

    first.refresh_from_db()
    assert (first.is_default, second.is_default) == (False, True)
    assert Profile.objects.default() == second


def test_two_defaults_break_the_model_validation() -> None:
    baker.make(Profile, name="first", steps=["title"], is_default=True)

    with pytest.raises(ValidationError, match="Another profile is the default already"):
        Profile(name="second", steps=["title"], is_default=True).full_clean()


def test_a_crawl_gets_the_profile_it_names_or_the_default() -> None:
    quick = profile_save(name="quick", steps=["title"])
    named = crawl_create(
        data=b"http://a.example/", source_name="t", options=CrawlOptions(profile="quick")
    )
    assert named.profile == quick
    assert crawl_create(data=b"http://a.example/", source_name="t").profile is None

    default = profile_save(name="house", steps=["headers"], is_default=True)

    assert crawl_create(data=b"http://a.example/", source_name="t").profile == default


def test_an_unknown_profile_is_refused_naming_the_stored_ones() -> None:
    profile_save(name="quick", steps=["title"])

    with pytest.raises(InputError, match=r"unknown profile 'slow' \(profiles: quick\)"):
        crawl_create(
            data=b"http://a.example/", source_name="t", options=CrawlOptions(profile="slow")
        )
    assert not Crawl.objects.exists()


def test_add_profile_on_the_command_line() -> None:
    profile_save(name="quick", steps=["title"])
    out = StringIO()

    call_command("add", "http://a.example/", "--profile", "quick", stdout=out)

    assert Crawl.objects.get().profile.name == "quick"
    with pytest.raises(CommandError, match="unknown profile 'other'"):
        call_command("add", "http://a.example/", "--profile", "other", stdout=StringIO())


def test_snapshot_results_carry_their_steps_behaviour_and_dependencies(live_site) -> None:
    profile_save(
        name="p", steps=[{"extractor": "wget", "behaviour": "blocking"}, "dom", "readability"]
    )
    crawl_create(
        data=live_site.url("/").encode(), source_name="t", options=CrawlOptions(profile="p")
    )
    snapshot_kind = work_types()["snapshot"]
    crawl_kind = work_types()["crawl"]
    crawl_kind.tick(claim_next(Crawl, lease_seconds=crawl_kind.lease_seconds))
    snapshot_kind.tick(claim_next(Snapshot, lease_seconds=snapshot_kind.lease_seconds))

    results = results_of(Snapshot.objects.get())

    assert {name: (r.behaviour, r.waits_for) for name, r in results.items()} == {
        "wget": (BLOCKING, []),
        "dom": (NONBLOCKING, ["wget"]),
        "readability": (NONBLOCKING, ["wget", "dom"]),
    }
    due = set(ArchiveResult.objects.due().values_list("extractor", flat=True))
    assert due == {"wget"}  # the rest wait for the blocking step


# --- each behaviour, end to end with the real extractors ---------------------------------------


def ran_and_failed_on_404(result: ArchiveResult) -> bool:
    return (
        result.status == ResultStatus.FAILED
        and result.attempts == 1
        and "404" in result.error
        and not result.was_stopped
    )


def archive_with(live_site: LiveSite, path: str, steps: list) -> Snapshot:
    profile_save(name="under-test", steps=steps)
    crawl_create(
        data=live_site.url(path).encode(),
        source_name="t",
        options=CrawlOptions(profile="under-test"),
    )
    work_off()
    return Snapshot.objects.get()


def test_a_blocking_failure_stops_later_steps_but_finally_runs_and_the_snapshot_fails(
    live_site: LiveSite,
) -> None:
    snapshot = archive_with(
        live_site,
        "/missing.html",
        [
            {"extractor": "wget", "behaviour": "blocking"},
            "title",
            {"extractor": "headers", "behaviour": "finally"},
        ],
    )
    results = results_of(snapshot)

    assert results["wget"].status == ResultStatus.FAILED
    assert results["title"].status == ResultStatus.SKIPPED
    assert results["title"].error.startswith(f"{STOPPED_PREFIX}blocking step wget failed: ")
    assert results["title"].was_stopped
    assert results["title"].attempts == 0
    # headers ran after wget's failure (and found the 404 too): finally steps are not stopped.
    assert ran_and_failed_on_404(results["headers"])
    assert snapshot.status == SnapshotStatus.FAILED
    assert snapshot.error.startswith("blocking step wget failed: ")
    crawl = snapshot.crawl
    assert crawl.status == CrawlStatus.SEALED
    assert crawl.report["snapshots"]["failed"] == 1


def test_a_blocking_step_that_succeeds_lets_the_rest_run(live_site: LiveSite) -> None:
    snapshot = archive_with(
        live_site, "/", [{"extractor": "wget", "behaviour": "blocking"}, "title", "headers"]
    )

    states = {name: r.status for name, r in results_of(snapshot).items()}
    assert states == dict.fromkeys(["wget", "title", "headers"], ResultStatus.SUCCEEDED)
    assert snapshot.status == SnapshotStatus.SEALED


def test_a_nonblocking_failure_is_recorded_and_the_others_go_on(live_site: LiveSite) -> None:
    snapshot = archive_with(live_site, "/missing.html", ["wget", "headers"])
    results = results_of(snapshot)

    assert results["wget"].status == ResultStatus.FAILED
    assert ran_and_failed_on_404(results["headers"])
    assert snapshot.status == SnapshotStatus.SEALED


def test_retry_runs_the_failed_blocking_step_and_the_steps_it_stopped(
    live_site: LiveSite,
) -> None:
    snapshot = archive_with(
        live_site,
        "/missing.html",
        [{"extractor": "wget", "behaviour": "blocking"}, "title"],
    )

    queued = snapshot_retry_failed(snapshot=snapshot)

    assert queued == 2
    states = {r.extractor: r.status for r in snapshot.results.all()}
    assert states == {"wget": ResultStatus.QUEUED, "title": ResultStatus.QUEUED}


# --- transitions of the profile machinery ------------------------------------------------------


def test_stop_skips_a_queued_or_backoff_result_with_its_reason() -> None:
    for status in (ResultStatus.QUEUED, ResultStatus.BACKOFF):
        result = baker.make(ArchiveResult, extractor="title", status=status)
        result.stop(blocking="wget", error="404 Not Found")

        assert result.status == ResultStatus.SKIPPED
        assert result.error == f"{STOPPED_PREFIX}blocking step wget failed: 404 Not Found"
        assert result.retry_at is None


def test_a_started_or_final_result_cannot_be_stopped() -> None:
    for status in (ResultStatus.STARTED, *ResultStatus.final()):
        result = baker.make(ArchiveResult, extractor="title", status=status)
        with pytest.raises(TransitionNotAllowed):
            result.stop(blocking="wget", error="x")


def test_abandon_fails_a_started_snapshot_only_once_its_results_are_final() -> None:
    snapshot = baker.make(Snapshot, status=SnapshotStatus.STARTED)
    result = baker.make(ArchiveResult, snapshot=snapshot, status=ResultStatus.QUEUED)

    with pytest.raises(TransitionNotAllowed):
        snapshot.abandon(error="blocking step wget failed")
    result.stop(blocking="wget", error="gone")
    result.save()
    snapshot.abandon(error="blocking step wget failed")

    assert snapshot.status == SnapshotStatus.FAILED
    assert (snapshot.error, snapshot.retry_at) == ("blocking step wget failed", None)


# --- the command and the admin -----------------------------------------------------------------


def run_profile(*args: str) -> str:
    out = StringIO()
    call_command("profile", *args, stdout=out)
    return out.getvalue()


def test_profile_add_list_show_and_remove() -> None:
    out = run_profile(
        "add", "quick", "--steps", '[{"extractor": "wget", "behaviour": "blocking"}, "title"]'
    )
    assert out == "Profile quick: wget [blocking] → title (after wget)\n"

    listing = run_profile("list")
    assert listing.splitlines()[0].startswith("* (built-in): headers → wget")
    assert "  quick: wget [blocking] → title (after wget)" in listing.splitlines()
    assert '"behaviour": "blocking"' in run_profile("show", "quick")

    run_profile("remove", "quick")
    assert not Profile.objects.exists()


def test_profile_add_names_what_is_wrong_and_saves_nothing() -> None:
    with pytest.raises(CommandError, match="steps: step 1: unknown extractor 'wgot'"):
        run_profile("add", "bad", "--steps", '["wgot"]')
    with pytest.raises(CommandError, match="steps are not JSON"):
        run_profile("add", "bad", "--steps", "[title")
    assert not Profile.objects.exists()


def test_a_profile_that_a_crawl_names_is_not_removed() -> None:
    profile_save(name="quick", steps=["title"])
    crawl_create(data=b"http://a.example/", source_name="t", options=CrawlOptions(profile="quick"))

    with pytest.raises(CommandError, match="profile quick is named by 1 crawl"):
        run_profile("remove", "quick")
    assert Profile.objects.filter(name="quick").exists()


def test_the_admin_saves_a_valid_profile_and_names_what_is_wrong(admin_client) -> None:
    url = reverse("admin:crawls_profile_add")
    form = {"name": "quick", "description": "", "steps": '["title", "headers"]'}

    response = admin_client.post(url, form)
    assert response.status_code == 302
    assert Profile.objects.get(name="quick").steps == ["title", "headers"]

    bad = {**form, "name": "cycle", "steps": '[{"extractor": "dom", "depends_on": ["dom"]}]'}
    response = admin_client.post(url, bad)
    assert response.status_code == 200
    assert "cannot depend on itself" in response.content.decode()
    assert not Profile.objects.filter(name="cycle").exists()


def test_a_profile_that_became_invalid_holds_its_crawl_with_the_reason() -> None:
    profile = profile_save(name="old", steps=["title", "headers"])
    crawl = crawl_create(
        data=b"http://a.example/", source_name="t", options=CrawlOptions(profile="old")
    )
    Profile.objects.filter(pk=profile.pk).update(steps=["title", "retired"])  # code changed
    crawl_kind, snapshot_kind = work_types()["crawl"], work_types()["snapshot"]
    crawl_kind.tick(claim_next(Crawl, lease_seconds=crawl_kind.lease_seconds))

    snapshot_kind.tick(claim_next(Snapshot, lease_seconds=snapshot_kind.lease_seconds))

    crawl.refresh_from_db()
    assert crawl.status == CrawlStatus.HELD
    assert crawl.hold_reason.startswith("its profile old is invalid: step 2: unknown extractor")
    snapshot = Snapshot.objects.get()
    assert snapshot.status == SnapshotStatus.QUEUED and not snapshot.results.exists()
