"""What a pipeline process (add, the orchestrator and the actors it forks) imports as it starts:
not the web side, and none of the libraries only some work needs (issue 19: the idle
orchestrator under 80 MB, one URL in about a second). Each is checked in a fresh interpreter,
as a command starts, with the checks the pipeline's commands run (core/checks.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

# Imported on use only: the web side (API, django-ninja, pydantic, the admin), the huey queue
# with its Redis and PostgreSQL clients, S3 (boto3), and parsers needed by one extractor, one
# input format or one finalizing check each.
NOT_AT_START = [
    "ninja", "pydantic", "archive.api", "huey", "redis", "psycopg", "boto3", "requests", "pypdf",
    "bs4", "feedparser", "inscriptis", "trafilatura", "lxml.html", "playwright", "yt_dlp",
    "core.admin", "crawls.admin",  # the admin's modules come with the URLs (archive/urls.py)
]  # fmt: skip

START_A_PIPELINE_COMMAND = """
import json, sys
import django
django.setup()
from django.core.management import load_command_class
for app, name in [("crawls", "add"), ("orchestrator", "orchestrator")]:
    command = load_command_class(app, name)
    command.check(tags=command.requires_system_checks)
import orchestrator.forking, orchestrator.work  # what the orchestrator forks its actors with
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture(scope="module")
def started_modules(tmp_path_factory) -> set[str]:
    data_dir = tmp_path_factory.mktemp("startup") / "data"
    completed = subprocess.run(
        [sys.executable, "-c", START_A_PIPELINE_COMMAND],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "archive.settings", "DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(completed.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", NOT_AT_START)
def test_a_pipeline_command_starts_without(started_modules: set[str], module: str) -> None:
    if module == "psycopg" and connection.vendor == "postgresql":
        pytest.skip("the database's own driver")
    assert module not in started_modules


def test_the_pipeline_itself_is_loaded_before_actors_are_forked(started_modules) -> None:
    # The forked actors start warm: the models, services and extractor classes are there.
    assert {"core.services.results", "core.services.finalizing", "core.extractors.wget"} <= (
        started_modules
    )


def test_a_command_collects_garbage_again_once_django_is_set_up(tmp_path) -> None:
    # manage.py turns the collector off while Django and Vellum are set up; commands run with
    # it on, and what start-up made frozen (never walked again).
    completed = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "import gc; print(gc.isenabled(), gc.get_freeze_count() > 10_000)"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "archive.settings",
             "DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )  # fmt: skip
    assert completed.stdout.split()[-2:] == ["True", "True"]
