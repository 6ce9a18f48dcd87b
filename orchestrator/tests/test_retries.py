"""The retry rule (orchestrator/retries.py): backoff after a temporary error (exponential,
jittered, bounded), "attempts exhausted" once none are left, recovery of an expired lease, an
attempt shared by a record that has not started, and the next poll of a waiting record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from orchestrator.retries import (
    LEASE_EXPIRED,
    backoff_delay,
    exhausted,
    exhausted_reason,
    next_poll,
    recover_expired_lease,
    retry_or_fail,
    share_failure,
)

SAMPLES = 200


@pytest.fixture(autouse=True)
def backoff_settings(settings) -> None:
    settings.BACKOFF_BASE = 10
    settings.BACKOFF_CAP = 3600


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5, 8])
def test_delay_is_jittered_within_half_and_all_of_the_exponential(attempt: int) -> None:
    exponential = 10 * 2 ** (attempt - 1)

    delays = [backoff_delay(attempt) for _ in range(SAMPLES)]

    assert all(exponential / 2 <= delay <= exponential for delay in delays)
    assert len(set(delays)) > SAMPLES // 2  # jittered, not one fixed value


def test_delay_grows_exponentially() -> None:
    lowest = [min(backoff_delay(attempt) for _ in range(50)) for attempt in range(1, 7)]
    highest = [max(backoff_delay(attempt) for _ in range(50)) for attempt in range(1, 7)]

    # Each attempt's range starts where the previous one ends: the smallest delay of attempt n
    # is at least the largest of attempt n - 1.
    for previous, current in zip(highest, lowest[1:], strict=False):
        assert current >= previous


def test_attempt_zero_is_treated_as_the_first() -> None:
    assert all(5 <= backoff_delay(0) <= 10 for _ in range(SAMPLES))


@pytest.mark.parametrize("retry_after", [7, 99.5, 3000])
def test_delay_is_never_below_retry_after(retry_after: float) -> None:
    assert all(backoff_delay(1, retry_after) >= retry_after for _ in range(SAMPLES))


def test_a_short_retry_after_does_not_shorten_the_delay() -> None:
    assert all(40 <= backoff_delay(4, retry_after=1) <= 80 for _ in range(SAMPLES))


def test_delay_never_exceeds_the_cap(settings) -> None:
    settings.BACKOFF_CAP = 60

    assert all(backoff_delay(attempt) <= 60 for attempt in range(1, 30) for _ in range(20))
    assert backoff_delay(20) == 60


def test_the_cap_wins_over_a_longer_retry_after(settings) -> None:
    settings.BACKOFF_CAP = 60

    assert backoff_delay(1, retry_after=86400) == 60


def test_zero_base_means_no_wait(settings) -> None:
    settings.BACKOFF_BASE = 0

    assert backoff_delay(5) == 0
    assert backoff_delay(5, retry_after=3) == 3


# --- the rule: back off while attempts are left, else fail --------------------------------------


def transitions_called(rule, attempts: int, *args, **kwargs) -> list[tuple[str, dict]]:
    """Apply ``rule`` to a record with ``attempts`` made and stand-in transitions; return the
    transitions it called, each as ``(name, keyword arguments)``."""
    calls = []
    rule(
        SimpleNamespace(attempts=attempts), *args, **kwargs,
        back_off=lambda **given: calls.append(("back_off", given)),
        fail=lambda **given: calls.append(("fail", given)),
    )  # fmt: skip
    return calls


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "expected"),
    [(0, 3, False), (2, 3, False), (3, 3, True), (4, 3, True), (1, 1, True), (0, 0, True)],
)
def test_exhausted_once_attempts_reach_the_limit(attempts, max_attempts, expected) -> None:
    assert exhausted(attempts, max_attempts) is expected


def test_exhausted_reason_says_how_many_and_why() -> None:
    assert exhausted_reason(3, "HTTP 503") == "attempts exhausted (3): HTTP 503"


def test_retry_or_fail_backs_off_with_a_growing_delay_while_attempts_are_left() -> None:
    [(name, given)] = transitions_called(retry_or_fail, 2, "HTTP 503", max_attempts=3)

    assert (name, given["error"]) == ("back_off", "HTTP 503")
    assert 10 <= given["delay"] <= 20  # backoff_delay(2) with BACKOFF_BASE 10


def test_retry_or_fail_honours_retry_after() -> None:
    calls = transitions_called(retry_or_fail, 1, "HTTP 429", max_attempts=3, retry_after=120)

    assert calls == [("back_off", {"error": "HTTP 429", "delay": 120})]


def test_retry_or_fail_fails_with_attempts_exhausted_once_none_are_left() -> None:
    calls = transitions_called(retry_or_fail, 3, "HTTP 503", max_attempts=3)

    assert calls == [("fail", {"error": "attempts exhausted (3): HTTP 503"})]


def test_retry_or_fail_can_fail_with_the_error_as_it_is() -> None:
    error = "finalizing failed: disk full"

    calls = transitions_called(retry_or_fail, 3, error, max_attempts=3, say_exhausted=False)

    assert calls == [("fail", {"error": error})]


# --- a worker that died: its lease ran out -------------------------------------------------------


def test_an_expired_lease_counts_as_a_temporary_error() -> None:
    [(name, given)] = transitions_called(recover_expired_lease, 1, max_attempts=3)

    assert (name, given["error"]) == ("back_off", LEASE_EXPIRED)
    assert 5 <= given["delay"] <= 10


def test_an_expired_lease_with_no_attempts_left_fails() -> None:
    calls = transitions_called(recover_expired_lease, 3, max_attempts=3)

    error = "attempts exhausted (3): worker stopped before finishing (lease expired)"
    assert calls == [("fail", {"error": error})]


def test_an_expired_lease_keeps_the_error_from_before() -> None:
    calls = transitions_called(
        recover_expired_lease, 3, max_attempts=3, earlier_error="finalizing failed: disk full"
    )

    error = (
        "attempts exhausted (3): worker stopped before finishing (lease expired)"
        "; before that: finalizing failed: disk full"
    )
    assert calls == [("fail", {"error": error})]


# --- a record that has not started shares another's failed attempt -----------------------------


def shared_calls(attempts: int, **kwargs) -> list[tuple[str, dict]]:
    calls = []
    share_failure(
        SimpleNamespace(attempts=attempts), "page did not answer headers: curl timed out", **kwargs,
        defer=lambda **given: calls.append(("defer", given)),
        give_up=lambda **given: calls.append(("give_up", given)),
    )  # fmt: skip
    return calls


def test_a_shared_attempt_with_attempts_left_after_it_defers_for_the_given_delay() -> None:
    calls = shared_calls(1, max_attempts=3, delay=12.5)

    assert calls == [
        ("defer", {"error": "page did not answer headers: curl timed out", "delay": 12.5})
    ]


def test_a_shared_attempt_that_is_the_last_gives_up_counting_it() -> None:
    calls = shared_calls(2, max_attempts=3, delay=12.5)

    error = "attempts exhausted (3): page did not answer headers: curl timed out"
    assert calls == [("give_up", {"error": error})]


# --- polling -------------------------------------------------------------------------------------


def test_next_poll_is_poll_interval_after_now(settings) -> None:
    settings.POLL_INTERVAL = 5
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    assert next_poll(now) == now + timedelta(seconds=5)


def test_next_poll_defaults_to_the_current_time(settings) -> None:
    settings.POLL_INTERVAL = 0.5
    before = timezone.now()

    poll = next_poll()

    assert before + timedelta(seconds=0.5) <= poll <= timezone.now() + timedelta(seconds=0.5)
