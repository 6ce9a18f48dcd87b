"""System checks on Vellum's settings that need the app registry (run by every command), and
on settings.STORAGE_TARGETS: every target can be built and holds byte-exact copies somewhere
other than the archive itself (``manage.py check --tag storage``).

The pipeline's commands (add, orchestrator, actor) run only ``PIPELINE_CHECKS``: these, and
Django's checks of the models. The URL and admin checks import the whole web side (the API,
django-ninja, pydantic, every admin module), a tenth of a second and megabytes that the
orchestrator would carry all its life; ``manage.py check`` and the web server run them.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.files.storage import FileSystemStorage, Storage
from django.utils.module_loading import import_string

from archive.privacy import data_dir_problems
from core.extractors import process
from core.extractors.cmdline import COMMAND, CONFIG, Option, find_options, goes_around_proxy
from core.extractors.registry import BY_NAME

SETTINGS_TAG = "settings"  # Vellum's checks of its own settings (this module's, crawls/checks.py)
STORAGE_TAG = "storage"
PIPELINE_CHECKS = [Tags.models, SETTINGS_TAG, STORAGE_TAG]

# What each extractor's entry in EXTRACTOR_OPTIONS may set: integers with their smallest value,
# flags, strings and lists of strings.
EXTRACTOR_OPTION_MINIMUMS = {"timeout": 1, "max_attempts": 1}
EXTRACTOR_OPTION_FLAGS = ("enabled",)
EXTRACTOR_OPTION_STRINGS = ("user_agent",)
EXTRACTOR_OPTION_STRING_LISTS = ("arguments",)
EXTRACTOR_OPTION_KEYS = (
    *EXTRACTOR_OPTION_MINIMUMS,
    *EXTRACTOR_OPTION_FLAGS,
    *EXTRACTOR_OPTION_STRINGS,
    *EXTRACTOR_OPTION_STRING_LISTS,
)


@register(SETTINGS_TAG)
def check_extractor_options(app_configs, **kwargs) -> list[Error]:
    """Report unknown extractor names, unknown keys and values of the wrong kind in
    settings.EXTRACTOR_OPTIONS (positive integers, true/false, a non-empty string, a list of
    strings)."""
    errors = []
    for name, options in settings.EXTRACTOR_OPTIONS.items():
        if name not in BY_NAME:
            known = ", ".join(BY_NAME)
            errors.append(
                Error(
                    f"EXTRACTOR_OPTIONS names an unknown extractor {name!r} ({known})",
                    id="core.E001",
                )
            )
            continue
        if not isinstance(options, dict):
            errors.append(Error(f"EXTRACTOR_OPTIONS[{name!r}] must be an object", id="core.E002"))
            continue
        errors += [
            error
            for key, value in options.items()
            if (error := _option_error(name, key, value)) is not None
        ]
        if "arguments" in options and not BY_NAME[name].takes_arguments:
            errors.append(
                Error(
                    f"EXTRACTOR_OPTIONS[{name!r}] cannot set 'arguments': {name} renders in the "
                    "browser it shares with the other rendering extractors",
                    id="core.E008",
                )
            )
        elif isinstance(options.get("arguments"), list):
            errors += _proxy_errors(name, BY_NAME[name].binaries[0], options["arguments"])
    return errors


def _proxy_errors(name: str, tool: str, arguments: list) -> list[Error]:
    """Refuse the ``arguments`` of extractor ``name`` (given to ``tool``) that would set,
    replace or switch off the egress proxy every tool fetches through (DESIGN.md §8, egress.py),
    as cmdline.goes_around_proxy tells, in any spelling the tool accepts."""
    if not all(isinstance(argument, str) for argument in arguments):
        return []  # reported as core.E007
    return [
        Error(
            f"EXTRACTOR_OPTIONS[{name!r}]['arguments'] cannot use {_spelled(option)}: "
            f"{tool} must fetch through Vellum's egress proxy, which applies the address "
            "policy (ALLOWED_PRIVATE_NETWORKS opens private networks instead)",
            id="core.E009",
        )
        for option in find_options(arguments, tool)
        if goes_around_proxy(option)
    ]


def _spelled(option: Option) -> str:
    """The option as written, with the wgetrc command or git key it sets (never its value,
    which may hold a proxy's password)."""
    if option.kind in (COMMAND, CONFIG) and option.value is not None:
        return f"{option.written} {option.value.partition('=')[0].strip()}"
    return option.written


def _option_error(name: str, key: str, value) -> Error | None:
    """The error in one ``EXTRACTOR_OPTIONS[name][key] = value``, or None when it is valid."""
    where = f"EXTRACTOR_OPTIONS[{name!r}][{key!r}]"
    if key in EXTRACTOR_OPTION_FLAGS:
        if isinstance(value, bool):
            return None
        return Error(f"{where} must be true or false, not {value!r}", id="core.E005")
    if key in EXTRACTOR_OPTION_STRINGS:
        if isinstance(value, str) and value.strip():
            return None
        return Error(f"{where} must be a non-empty string, not {value!r}", id="core.E006")
    if key in EXTRACTOR_OPTION_STRING_LISTS:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return None
        return Error(f"{where} must be a list of strings, not {value!r}", id="core.E007")
    minimum = EXTRACTOR_OPTION_MINIMUMS.get(key)
    if minimum is None:
        allowed = ", ".join(EXTRACTOR_OPTION_KEYS)
        return Error(
            f"EXTRACTOR_OPTIONS[{name!r}] has an unknown key {key!r} (allowed: {allowed})",
            id="core.E003",
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return Error(f"{where} must be an integer of at least {minimum}, not {value!r}",
                     id="core.E004")  # fmt: skip
    return None


@register(SETTINGS_TAG)
def check_tool_confinement(app_configs, **kwargs) -> list[Warning]:
    """Warn when util-linux's setpriv or prlimit is missing: extractor tools then run without
    dying with their actor, or without the kernel's per-file size bound."""
    missing = [name for name, path in (("setpriv", process.SETPRIV), ("prlimit", process.PRLIMIT))
               if path is None]  # fmt: skip
    if not missing:
        return []
    return [
        Warning(
            f"{' and '.join(missing)} not found (util-linux): extractor tools run without "
            "dying with their actor or without the per-file MAX_DOWNLOAD_BYTES bound",
            hint="Install util-linux (bash .ci/install does).",
            id="core.W001",
        )
    ]


@register(SETTINGS_TAG)
def check_data_dir_private(app_configs, **kwargs) -> list[Warning]:
    """Warn when group or others have access to DATA_DIR (made by an older version, or by hand):
    its database holds session keys and password hashes (archive/privacy.py)."""
    return [
        Warning(
            problem,
            hint="Run manage.py init (it sets DATA_DIR to 0700), or chmod 700 it.",
            id="core.W002",
        )
        for problem in data_dir_problems(settings.DATA_DIR)
    ]


@register(Tags.files, STORAGE_TAG)
def check_storage_targets(app_configs, **kwargs) -> list[Error]:
    """Report storage targets that are not ``{"BACKEND": ..., "OPTIONS": {...}}``, whose BACKEND
    does not import as a Storage class or rejects its OPTIONS, file-system targets without an
    absolute ``location`` outside DATA_DIR/archive, and S3 targets without a ``bucket_name`` or
    that gzip what they store."""
    errors = []
    for name, entry in settings.STORAGE_TARGETS.items():
        errors += _entry_errors(name, entry)
    return errors


def _entry_errors(name: str, entry) -> list[Error]:
    """Return the errors of one STORAGE_TARGETS entry, stopping at the first that makes the
    rest meaningless."""
    where = f"STORAGE_TARGETS[{name!r}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("BACKEND"), str):
        return [Error(f"{where} must be an object with a BACKEND (a dotted path)", id="core.E101")]
    options = entry.get("OPTIONS", {})
    if not isinstance(options, dict):
        return [Error(f"{where}['OPTIONS'] must be an object", id="core.E102")]
    try:
        backend = import_string(entry["BACKEND"])
    except ImportError as error:
        return [Error(f"{where}: BACKEND {entry['BACKEND']!r} does not import: {error}",
                      id="core.E103")]  # fmt: skip
    if not (isinstance(backend, type) and issubclass(backend, Storage)):
        return [Error(f"{where}: BACKEND {entry['BACKEND']!r} is not a Django Storage class",
                      id="core.E103")]  # fmt: skip
    try:
        backend(**options)  # makes no connection: S3Storage connects on first use
    except Exception as error:  # any failure here is the OPTIONS' fault
        return [Error(f"{where}: {backend.__name__} rejects its OPTIONS: {error}", id="core.E104")]
    if issubclass(backend, FileSystemStorage):
        return _file_system_errors(where, options)
    if _is_s3(backend):
        return _s3_errors(where, options)
    return []


def _file_system_errors(where: str, options: dict) -> list[Error]:
    """A mirror needs its own absolute folder: a relative one would follow the working
    directory, MEDIA_ROOT is not meant for it, and one in the archive would copy into itself."""
    location = options.get("location")
    if not location or not Path(str(location)).is_absolute():
        return [
            Error(
                f"{where}: a FileSystemStorage target needs an absolute OPTIONS location, "
                f"not {location!r}",
                id="core.E105",
            )
        ]
    folder = Path(str(location)).resolve()
    archive = Path(settings.ARCHIVE_DIR).resolve()
    if folder.is_relative_to(archive):
        return [
            Error(
                f"{where}: location {location} is inside the archive ({archive}); copies would "
                "land among the snapshots they copy",
                hint="Point it at another disk or mount, outside DATA_DIR/archive.",
                id="core.E106",
            )
        ]
    return []


def _is_s3(backend: type) -> bool:
    try:  # here, not at the top: boto3 takes ~0.27 s to import, paid only with S3 targets
        from storages.backends.s3 import S3Storage
    except ImportError:  # boto3 missing: E104 has already said so for an S3 target
        return False
    return issubclass(backend, S3Storage)


def _s3_errors(where: str, options: dict) -> list[Error]:
    """An S3 target names its own bucket (a shared AWS_STORAGE_BUCKET_NAME would put every
    target in one), and stores bytes as given: gzip would make every copy fail its checksums."""
    errors = []
    if not options.get("bucket_name"):
        errors.append(Error(f"{where}: an S3 target needs OPTIONS bucket_name", id="core.E107"))
    if options.get("gzip"):
        errors.append(
            Error(
                f"{where}: gzip must be off: a compressed object no longer matches the "
                "snapshot's manifest",
                id="core.E108",
            )
        )
    return errors
