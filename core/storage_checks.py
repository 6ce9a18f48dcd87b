"""System checks on settings.STORAGE_TARGETS: every target can be built and holds byte-exact
copies somewhere other than the archive itself (``manage.py check --tag storage``)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.files.storage import FileSystemStorage, Storage
from django.utils.module_loading import import_string


@register(Tags.files, "storage")
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
    try:
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
