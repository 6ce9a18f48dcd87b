"""Security basics: sign-in attempts are limited (django-axes), pages carry the secure headers,
and what needs a user asks for one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


HTTPS_PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.http import HttpResponse
from django.middleware.csrf import CsrfViewMiddleware, get_token
from django.middleware.security import SecurityMiddleware
from django.test import RequestFactory

def form_page(request):  # a page with a form: it sets the CSRF cookie
    get_token(request)
    return HttpResponse("form")

handler = SecurityMiddleware(CsrfViewMiddleware(form_page))
request = RequestFactory().get("/", HTTP_HOST="127.0.0.1", HTTP_X_FORWARDED_PROTO="https")
response = handler(request)
cookie = response.cookies[settings.CSRF_COOKIE_NAME]
hsts = response.get("Strict-Transport-Security")
print(json.dumps({"name": cookie.key, "secure": bool(cookie["secure"]),
                  "session": settings.SESSION_COOKIE_NAME, "hsts": hsts}))
"""


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {"name": "csrftoken", "secure": False, "session": "sessionid", "hsts": None}),
        (
            {"HTTPS": "true", "HSTS_SECONDS": "3600"},
            {"name": "__Host-csrftoken", "secure": True, "session": "__Host-sessionid",
             "hsts": "max-age=3600"},
        ),
    ],
)  # fmt: skip
def test_behind_https_the_cookies_are_secure_host_only_and_hsts_is_sent(
    tmp_path, env: dict, expected: dict
) -> None:
    """Read from a fresh process: the settings module reads HTTPS and HSTS_SECONDS at start-up."""
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("HTTPS", "HSTS_SECONDS")},
        "DJANGO_SETTINGS_MODULE": "archive.settings",
        "DATA_DIR": str(tmp_path),
        **env,
    }
    environment.pop("DATABASE_URL", None)

    probe = subprocess.run(
        [sys.executable, "-c", HTTPS_PROBE],
        env=environment,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == expected
