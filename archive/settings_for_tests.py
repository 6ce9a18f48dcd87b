"""Settings for the test suite: production settings, with a fresh DATA_DIR and short delays.

pytest-django imports this before any conftest.py (pyproject.toml names it), so the environment
set here is what Django, and every actor subprocess a test starts, reads. Subprocesses inherit
DJANGO_SETTINGS_MODULE and DATA_DIR, and so share the session's folder and test database.
"""

import os
import tempfile

if "DATA_DIR" not in os.environ:
    os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="vellum-test-")
    os.environ["VELLUM_TEST_DATA_DIR_CREATED"] = "1"  # conftest.py removes it afterwards

# Under pytest-xdist (`pytest -n 2`, .ci/test) each worker inherits the controller's DATA_DIR:
# it takes a folder of its own inside it, so that workers never share a test database, a
# signing key or a browser profile, and tests that count "their" Chromium or actor processes
# by DATA_DIR count only their worker's. The subprocesses a worker starts inherit the worker's
# folder (and its name), and keep it.
if os.environ.get("PYTEST_XDIST_WORKER", "") not in ("", os.environ.get("VELLUM_TEST_WORKER")):
    os.environ["VELLUM_TEST_WORKER"] = os.environ["PYTEST_XDIST_WORKER"]
    os.environ["DATA_DIR"] = os.path.join(os.environ["DATA_DIR"], os.environ["VELLUM_TEST_WORKER"])
    os.makedirs(os.environ["DATA_DIR"], mode=0o700, exist_ok=True)  # as mkdtemp makes it

# Tests never sleep through production backoffs or polls; a test may still set its own.
os.environ.setdefault("BACKOFF_BASE", "0.2")
os.environ.setdefault("BACKOFF_CAP", "2")
os.environ.setdefault("POLL_INTERVAL", "0.2")
os.environ.setdefault("ORCHESTRATOR_TICK", "0.2")
os.environ.setdefault("ACTOR_IDLE_EXIT", "1")
os.environ.setdefault("HUEY_IMMEDIATE", "1")
os.environ.setdefault("API_RATE", "100000/min")  # test_api.py tests the limit with its own
os.environ.setdefault("CLAIMS_LOG", "1")  # the fault-injection suite checks it for double claims
# Pipeline and orchestration tests run the extractors that need no browser (a snapshot then
# takes a fraction of a second); the browser, SingleFile, readability, media and git extractors
# have their own tests, and the end-to-end test of the full default profile sets EXTRACTORS="".
# The test sites serve on 127.0.0.1, which the address policy refuses in production.
os.environ.setdefault("ALLOWED_PRIVATE_NETWORKS", "127.0.0.1")
os.environ.setdefault("EXTRACTORS", "headers,wget,title,favicon,htmltotext,outlinks")

from archive.settings import *  # noqa: F403
from archive.settings import STORAGES

# No collectstatic before tests, and a fast hasher for the many logins of admin tests.
STORAGES = {
    **STORAGES,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
