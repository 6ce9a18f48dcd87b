"""Security basics: sign-in attempts are limited (django-axes), pages carry the secure headers,
and what needs a user asks for one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def staff():
    return get_user_model().objects.create_user(
        "keeper", password="correct horse battery", is_staff=True
    )


def sign_in(client: Client, password: str):
    return client.post(LOGIN, {"username": "keeper", "password": password})


def test_after_five_wrong_passwords_even_the_right_one_is_refused(settings, staff) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, "wrong").status_code == 200  # the form again, with its error

    locked = sign_in(client, "wrong")
    assert locked.status_code == 429
    assert sign_in(client, "correct horse battery").status_code == 429
    assert "_auth_user_id" not in client.session


def test_a_good_sign_in_resets_the_count(settings, staff) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, "wrong")

    assert sign_in(client, "correct horse battery").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, "wrong").status_code == 200


def test_pages_carry_the_secure_headers() -> None:
    response = Client().get(LOGIN)

    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


@pytest.mark.parametrize("path", ["/admin/", "/admin/crawls/crawl/", "/admin/core/snapshot/"])
def test_the_admin_asks_for_a_sign_in(path: str) -> None:
    response = Client().get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_sign_in_form_without_its_csrf_token_is_refused(staff) -> None:
    client = Client(enforce_csrf_checks=True)

    response = sign_in(client, "correct horse battery")

    assert response.status_code == 403
