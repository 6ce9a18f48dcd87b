"""Backoff after a temporary error (orchestrator/retries.py): exponential, jittered, bounded."""

from __future__ import annotations

import pytest

from orchestrator.retries import backoff_delay

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
