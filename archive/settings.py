"""Django settings for Vellum, read from environment variables.

Every variable, its default and its meaning is listed in README.md ("Configuration"). Values are
validated here, at start-up, so bad configuration fails before any work is claimed.
"""

from __future__ import annotations

import importlib.util
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from archive.env import (
    env_bool,
    env_cron,
    env_int,
    env_json_object,
    env_list,
    env_networks,
    env_number,
    env_path,
    env_str,
    write_private,
)
from archive.privacy import DIR_MODE, FILE_MODE, make_private_dir, restrict_umask

# Nothing Vellum writes is for other users of the machine (DESIGN.md §8): the database holds
# session keys and password hashes, DATA_DIR the signing key and the archive. Settings are the
# first thing every entry point imports (manage.py, the WSGI/ASGI app, actors, huey), and the
# tools they start inherit the umask, so this holds whatever umask the process was given.
restrict_umask()

BASE_DIR = Path(__file__).resolve().parent.parent

# --- where data lives --------------------------------------------------------------------------
DATA_DIR = env_path("DATA_DIR", BASE_DIR / "data")
ARCHIVE_DIR = DATA_DIR / "archive"
SOURCES_DIR = DATA_DIR / "sources"
LOGS_DIR = DATA_DIR / "logs"
KEYS_DIR = DATA_DIR / "keys"  # the Ed25519 key pair that signs manifests (core/folder/signing.py)

if DATA_DIR in (BASE_DIR / name for name in ("archive", "core", "crawls", "orchestrator")):
    raise ImproperlyConfigured(f"DATA_DIR={DATA_DIR} would mix data into a source package")

# --- Django core -------------------------------------------------------------------------------
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Served over HTTPS through a proxy that terminates TLS and sets X-Forwarded-Proto (and drops one
# sent by the client): the cookies go only over TLS, and their __Host- names keep a page on
# another host of the same site (a replay subdomain) from setting cookies that shadow them
# (RFC 6265bis, cookie name prefixes). HSTS_SECONDS > 0 also tells browsers to use HTTPS only.
HTTPS = env_bool("HTTPS", False)
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 0, minimum=0)


def _secret_key() -> str:
    """Return SECRET_KEY from the environment, else one kept in DATA_DIR (created on first use)."""
    from_env = env_str("SECRET_KEY", "")
    if from_env:
        return from_env
    key_file = DATA_DIR / "secret_key"
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(50)
    try:
        make_private_dir(DATA_DIR)
        write_private(key_file, key)
    except OSError:
        pass  # read-only or absent DATA_DIR: a per-process key still serves (sessions won't last)
    return key


SECRET_KEY = _secret_key()

INSTALLED_APPS = [
    "django.contrib.admin.apps.SimpleAdminConfig",  # admin modules: archive/urls.py
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "axes",
    "django_fsm",  # its admin templates: the transition buttons (core/admin/transitions.py)
    "crawls",
    "core",
    "orchestrator",
]

MIDDLEWARE = [
    "core.web.middleware.ReplayHostMiddleware",  # first: the replay host sees no cookies, no app
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it turns a locked-out login into its answer
]

ROOT_URLCONF = "archive.urls"
WSGI_APPLICATION = "archive.wsgi.application"

# django-ninja's own files, the API docs page's template and its Swagger UI (archive/api.py),
# found without importing ninja: as an installed app it would be imported, with pydantic, by
# every process at start-up (some 0.1 s and 7 MB), the orchestrator and its actors included.
NINJA_DIR = Path(importlib.util.find_spec("ninja").origin).parent

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database: SQLite in DATA_DIR by default, anything dj-database-url reads otherwise ------------
DATABASE_URL = env_str("DATABASE_URL", "")
SQLITE_BUSY_TIMEOUT = env_number("SQLITE_BUSY_TIMEOUT", 30, minimum=1)

if DATABASE_URL:
    try:
        _database = dj_database_url.parse(DATABASE_URL, conn_max_age=0)
    except ValueError as error:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {error}") from None
else:
    _database = {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "db.sqlite3"}

if _database["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers (web, status) work while an actor writes; IMMEDIATE transactions take the
    # write lock up front so two writers queue instead of failing mid-way, and Vellum's queue on a
    # lock file first, woken as it frees rather than polling SQLite (archive/backends/sqlite3).
    _database["ENGINE"] = "archive.backends.sqlite3"
    _database["OPTIONS"] = {
        "timeout": SQLITE_BUSY_TIMEOUT,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests run actors in subprocesses, which must see the same file as the test process.
    _database["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}

DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Failed sign-ins are counted per user name and address (django-axes): after LOGIN_FAILURE_LIMIT
# of them that pair is locked out for LOGIN_COOLOFF_MINUTES, whatever the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
# Django's storages set these modes on what they write (collectstatic into DATA_DIR/static, a
# FileSystemStorage target): owner only, as everything else (archive/privacy.py).
FILE_UPLOAD_PERMISSIONS = FILE_MODE
FILE_UPLOAD_DIRECTORY_PERMISSIONS = DIR_MODE
# htmx (npm, package.json) for the live progress page, served with the app's own static files,
# and django-ninja's Swagger UI for the API docs page (ninja/...).
STATICFILES_DIRS = [
    ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
    NINJA_DIR / "static",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
LOGIN_URL = "core:login"  # staff or not; the admin keeps its own (staff only)
LOGIN_REDIRECT_URL = "core:index"  # after signing in on the sign-in page itself (no ?next=)

# --- preservation: finalizing, storage targets, fixity audits (DESIGN.md §2, §5) ------------------
# Package each snapshot's WARCs (with its page list and screenshot) as WACZ while finalizing.
PACKAGE_WACZ = env_bool("PACKAGE_WACZ", True)
# Seconds py-wacz may take to package one snapshot before finalizing retries it.
WACZ_TIMEOUT = env_int("WACZ_TIMEOUT", 300, minimum=1)
# Store unchanged bytes once (core/services/dedup.py): a response whose payload a sealed snapshot
# already holds is written as a WARC revisit record, and identical files share one hard-linked
# copy in DATA_DIR/blobs/. Payloads under DEDUP_MIN_BYTES stay whole (a revisit record costs
# about as much as a small payload).
DEDUPLICATE = env_bool("DEDUPLICATE", True)
DEDUP_MIN_BYTES = env_int("DEDUP_MIN_BYTES", 512, minimum=1)
# Where sealed snapshots are copied besides DATA_DIR, as JSON: {name: Django STORAGES entry}, e.g.
# {"mirror": {"BACKEND": "django.core.files.storage.FileSystemStorage",
#             "OPTIONS": {"location": "/mnt/mirror"}},
#  "s3": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {"bucket_name": "vellum"}}}
# Each becomes a Django storage alias; names and backends are checked at start-up
# (core/checks.py).
STORAGE_TARGETS = env_json_object("STORAGE_TARGETS", {})
if _reserved := sorted(STORAGE_TARGETS.keys() & STORAGES.keys()):
    raise ImproperlyConfigured(f"STORAGE_TARGETS may not be named {', '.join(_reserved)}")
STORAGES.update(STORAGE_TARGETS)
# Tries per storage copy before it fails (a target that is down backs off up to BACKOFF_CAP).
STORAGE_MAX_ATTEMPTS = env_int("STORAGE_MAX_ATTEMPTS", 10, minimum=1)
# Seconds a storage-copy actor owns a copy (upload and read-back of a whole snapshot folder).
STORAGE_LEASE_SECONDS = env_int("STORAGE_LEASE_SECONDS", 1800, minimum=1)
# When the scheduled fixity audit runs (cron fields: minute hour day month weekday), and how many
# days a snapshot's last check stays fresh enough to skip.
FIXITY_AUDIT_CRON = env_cron("FIXITY_AUDIT_CRON", "30 3 * * *")
FIXITY_AUDIT_INTERVAL_DAYS = env_number("FIXITY_AUDIT_INTERVAL_DAYS", 30, minimum=0)

# --- huey (django-huey): side work; SQLite-backed by default, Redis when REDIS_URL is set ---------
REDIS_URL = env_str("REDIS_URL", "")
HUEY_IMMEDIATE = env_bool("HUEY_IMMEDIATE", False)
if REDIS_URL:
    _huey_queue = {"huey_class": "huey.PriorityRedisHuey", "url": REDIS_URL}
else:
    _huey_queue = {"huey_class": "huey.SqliteHuey", "filename": str(DATA_DIR / "huey.sqlite3")}
DJANGO_HUEY = {
    "default": "default",
    "queues": {
        "default": {
            **_huey_queue,
            "name": "vellum",
            "immediate": HUEY_IMMEDIATE,
            "consumer": {"workers": 1, "worker_type": "thread"},
        },
    },
}

# --- notifications: when a crawl seals (crawls/notifications.py), sent by the huey consumer -------
# A webhook that gets every crawl's report as JSON, and addresses that get it by email; a crawl
# may name its own too (add --webhook, --email). Both are checked at start-up.
NOTIFY_WEBHOOK_URL = env_str("NOTIFY_WEBHOOK_URL", "")
NOTIFY_EMAIL = env_list("NOTIFY_EMAIL", [])
# Deliveries per webhook before it is given up (backoff between them, as for extractors).
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 8, minimum=1)
NOTIFY_TIMEOUT = env_int("NOTIFY_TIMEOUT", 10, minimum=1)  # seconds one webhook POST may take
# Django's mail settings, for NOTIFY_EMAIL: an SMTP server on localhost:25 unless told otherwise.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "vellum@localhost")

# --- archiving -----------------------------------------------------------------------------------
# Seconds an extractor may run before its whole process group is killed (a temporary error).
EXTRACTOR_TIMEOUT = env_int("EXTRACTOR_TIMEOUT", 60, minimum=1)
# Tries per archive result before "attempts exhausted".
MAX_ATTEMPTS = env_int("MAX_ATTEMPTS", 3, minimum=1)
# Exponential backoff after a temporary error: BACKOFF_BASE * 2**(attempt-1), capped, with jitter.
BACKOFF_BASE = env_number("BACKOFF_BASE", 10, minimum=0)
BACKOFF_CAP = env_number("BACKOFF_CAP", 3600, minimum=0)
# Seconds a tool (curl, wget, the egress proxy on their way) may take to open a connection to a
# server: a host that does not answer fails at once, not after the whole EXTRACTOR_TIMEOUT.
CONNECT_TIMEOUT_SECONDS = env_number("CONNECT_TIMEOUT_SECONDS", 10, minimum=1)
# Fairness among hosts (a host is a URL's host:port, core/models/hosts.py): at most
# HOST_CONCURRENCY archive results of one host run at once (0: no limit), and a host whose pages
# fail to connect, reset or time out HOST_PAUSE_AFTER_FAILURES times in a row is paused (its
# results are not started) for a backoff that grows with each further failure (the retry rule's
# BACKOFF_BASE and BACKOFF_CAP); then one result is let through, and a success resumes it.
HOST_CONCURRENCY = env_int("HOST_CONCURRENCY", 2, minimum=0)
HOST_PAUSE_AFTER_FAILURES = env_int("HOST_PAUSE_AFTER_FAILURES", 3, minimum=1)
# Largest response body one fetch may download, in bytes.
MAX_DOWNLOAD_BYTES = env_int("MAX_DOWNLOAD_BYTES", 200 * 1024 * 1024, minimum=1024)
USER_AGENT = env_str(
    "USER_AGENT", "Mozilla/5.0 (compatible; Vellum/0.1; +https://github.com/vellum)"
)
# Extractor names to run, in registry order; empty means every available one.
EXTRACTORS = env_list("EXTRACTORS", [])
# Per-extractor overrides, as JSON: {"wget": {"timeout": 120, "max_attempts": 5, "enabled": true,
# "user_agent": "...", "arguments": ["--header=X: y"]}}. Names and keys are checked at start-up
# (core/checks.py).
EXTRACTOR_OPTIONS = env_json_object("EXTRACTOR_OPTIONS", {})
# The address policy (DESIGN.md §8, core/extractors/addresses.py): every fetch (seeds, redirects,
# requisites, browser subresources, media, git, webhooks) refuses loopback, private, link-local,
# unique-local, multicast and unspecified addresses. These networks ("CIDR" or "CIDR:port",
# "[v6]/len:port"), comma-separated, are opened anyway: e.g. "10.1.2.0/24" for an intranet.
ALLOWED_PRIVATE_NETWORKS = env_networks("ALLOWED_PRIVATE_NETWORKS", [])
# Networks opened for webhooks alone (a receiver on the intranet), in the same form: archived
# pages still may not reach them.
WEBHOOK_ALLOWED_NETWORKS = env_networks("WEBHOOK_ALLOWED_NETWORKS", [])
# Seconds the rendering extractors spend on a loaded page before they capture it: scroll it to
# the bottom, load its lazy images, wait for its network to go quiet (core/extractors/
# behaviours.py); never more than a quarter of what is left of the extractor's timeout. 0: none.
# A crawl may set its own, as it may its page limit (add --behaviour-seconds N --scroll-pages N).
BEHAVIOUR_SECONDS = env_number("BEHAVIOUR_SECONDS", 10, minimum=0)
# Times a page may grow while it is scrolled (an infinite scroll) before scrolling stops.
SCROLL_PAGE_LIMIT = env_int("SCROLL_PAGE_LIMIT", 10, minimum=0)
# Let Chromium encode screenshot.png for speed, not size (CDP's optimizeForSpeed): the same
# pixels, for 0.3 CPU-s less of Chromium per screenshot and a 27 % larger PNG on python3-doc
# pages (core/extractors/screenshot.py). Off: screenshots are most of a snapshot's bytes, kept for
# good, while the CPU is spent once.
SCREENSHOT_OPTIMIZE_FOR_SPEED = env_bool("SCREENSHOT_OPTIMIZE_FOR_SPEED", False)
# Pages one actor's shared Chromium renders before it starts afresh (core/extractors/browser.py).
CHROMIUM_RESTART_PAGES = env_int("CHROMIUM_RESTART_PAGES", 50, minimum=1)
# Percent of the data disk in use above which no new snapshot starts (the disk guard, DESIGN §3).
DISK_HOLD_PERCENT = env_number("DISK_HOLD_PERCENT", 90, minimum=0)
if DISK_HOLD_PERCENT > 100:
    raise ImproperlyConfigured("DISK_HOLD_PERCENT must be at most 100")
# The estimate before a crawl starts (add --estimate, crawls/estimate.py): HEAD every seed, add up
# the Content-Lengths, and hold a crawl whose expected size would pass the disk guard. A response
# is stored about ESTIMATE_COPIES times (wget's copy, the WARC, the WACZ that packs the WARC).
ESTIMATE_BEFORE_CRAWL = env_bool("ESTIMATE_BEFORE_CRAWL", False)  # as if add always said so
ESTIMATE_COPIES = env_number("ESTIMATE_COPIES", 3, minimum=1)
ESTIMATE_TIMEOUT = env_int("ESTIMATE_TIMEOUT", 10, minimum=1)  # seconds one HEAD may take
ESTIMATE_WORKERS = env_int("ESTIMATE_WORKERS", 8, minimum=1)  # HEAD requests at once

# The archive's pages (/, /snapshot/<id>/) and files: open to anyone, or (the default) only to
# signed-in staff users.
PUBLIC_ARCHIVE = env_bool("PUBLIC_ARCHIVE", False)
# Saving in one click (/save/<url>, POST /api/v1/save, core/services/saves.py): a URL the same
# reader saved (or can read a capture of) in the last SAVE_DEDUP_MINUTES minutes opens that
# crawl or capture again instead of queuing another. 0: every save queues a new crawl.
SAVE_DEDUP_MINUTES = env_int("SAVE_DEDUP_MINUTES", 10, minimum=0)
# REST API calls one user may make ("<count>/<s|min|h|d>"); more get 429 with Retry-After.
API_RATE = env_str("API_RATE", "600/min")
# Tags one request (the API, the add page, manage.py add, one input file's entries) may name;
# more are refused with 400 (core/services/crawls.py), so one request cannot flood the tag list.
MAX_TAGS_PER_REQUEST = env_int("MAX_TAGS_PER_REQUEST", 50, minimum=1)

# Replay (core/web/origins.py) runs archived scripts, so it lives on a host of its own: "host" or
# "host:port", e.g. "replay.archive.example", or, with wildcard DNS, "*.replay.archive.example",
# which gives each snapshot an origin of its own. Empty: "*.replay.localhost" on the app's port
# when the archive is opened on a loopback name, and no replay on any other host.
REPLAY_HOST = env_str("REPLAY_HOST", "")
REPLAY_LINK_MAX_AGE = env_int("REPLAY_LINK_MAX_AGE", 12 * 3600, minimum=60)  # seconds
# ReplayWeb.page's ui.js and sw.js (npm, package.json), served on the replay host.
REPLAY_ASSETS_DIR = BASE_DIR / "node_modules" / "replaywebpage"
ALLOWED_HOSTS += [
    name
    # ".name" is Django's "name and every name below it", which a wildcard replay host needs.
    for name in [
        ".replay.localhost",
        (urlsplit(f"//{REPLAY_HOST.strip()}").hostname or "").replace("*.", ".", 1),
    ]
    if name and name not in ALLOWED_HOSTS
]

# --- orchestrator ------------------------------------------------------------------------------
# Most actor processes of each kind at once.
ACTORS_CRAWL = env_int("ACTORS_CRAWL", 1, minimum=1)
ACTORS_SNAPSHOT = env_int("ACTORS_SNAPSHOT", 2, minimum=1)
ACTORS_ARCHIVERESULT = env_int("ACTORS_ARCHIVERESULT", 4, minimum=1)
ACTORS_STORAGECOPY = env_int("ACTORS_STORAGECOPY", 1, minimum=1)
# Most snapshots in progress at once (the crawl frontier); more wait queued.
MAX_STARTED_SNAPSHOTS = env_int("MAX_STARTED_SNAPSHOTS", 16, minimum=1)
# Most seconds between two orchestrator ticks: a safety net, since new due work, an actor's exit
# and the next retry_at each wake it at once (orchestrator/wakeups.py); and an actor's idle
# seconds before it exits.
ORCHESTRATOR_TICK = env_number("ORCHESTRATOR_TICK", 10, minimum=0.05)
ACTOR_IDLE_EXIT = env_number("ACTOR_IDLE_EXIT", 5, minimum=0)
# Seconds between checks of a started crawl or snapshot waiting for its children: a safety net,
# since the last child to finish wakes its parent. At 5 s, each snapshot of a 100-page crawl was
# ticked ~30 times for nothing, 3,000 claims in all (issue 18).
POLL_INTERVAL = env_number("POLL_INTERVAL", 30, minimum=0.05)
# Seconds a claimed crawl or snapshot stays owned by its actor (results: their timeout + margin).
LEASE_SECONDS = env_int("LEASE_SECONDS", 300, minimum=1)
LEASE_MARGIN = env_int("LEASE_MARGIN", 30, minimum=0)
# Log every claim and release to DATA_DIR/logs/claims.jsonl (an audit: some 3 KB per page).
CLAIMS_LOG = env_bool("CLAIMS_LOG", False)
if LEASE_SECONDS <= 2 * POLL_INTERVAL:
    # A wake-up tells a waiting record from a leased one by how far ahead its retry_at lies.
    raise ImproperlyConfigured("LEASE_SECONDS must be more than twice POLL_INTERVAL")

# --- logging -----------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    },
    # The console shows warnings only, so the CLI stays readable; full logs go to DATA_DIR/logs/.
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "plain", "level": "WARNING"}
    },
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    "loggers": {
        **{
            name: {"handlers": ["stderr"], "level": LOG_LEVEL, "propagate": False}
            for name in ("crawls", "core", "orchestrator")
        },
        # trafilatura logs a page it finds no article in as an ERROR; the readability result
        # already records that ("no article text found").
        "trafilatura": {"level": "CRITICAL"},
        # The integrity check reports a malformed PDF or WARC as a problem of its own; these
        # libraries' warnings about the same file would only repeat it on the console.
        "pypdf": {"level": "ERROR"},
        "warcio": {"level": "ERROR"},
    },
}
