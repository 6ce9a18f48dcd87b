"""A snapshot folder's ``index.json``: its one writer, its one reader, and its version.

``snapshot_index`` builds the document from the rows (finalizing writes it with ``write_index``);
``read_folder`` reads it back into checked row values for reindex: every value is type-checked
and run through the model field's own validators, so a damaged or foreign file becomes one readable
InvalidIndex message instead of a bad row. The snapshot's state comes from its manifest.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.redaction import redact_command
from core.folder.manifest import INDEX_NAME, MANIFEST_NAME, atomic_write, parse_manifest
from core.folder.signing import key_fingerprint, public_key_pem
from core.models import ArchiveResult, Snapshot, Tag
from crawls.choices import SkipReason
from crawls.models import POLITENESS_FIELDS, Crawl, CrawlSkip
from orchestrator.prepared import Statement

# The version written. Each earlier one is still read: 1 had no crawl, result history or priority;
# 2 added the history ("history") and the crawl, but for its seeds: those are the depth-0
# snapshots' URLs (each folder holding every seed would grow as seeds²); 3 added refusals; 4 added
# each result's missing files ("missing": {"url", "reason"} objects). Later additions
# (signing_key; crawl.input_report, snapshot.given; crawl.politeness, crawl.stop_reason and
# snapshot.skipped) are optional keys, which a reader of the same version ignores.
INDEX_VERSION = 4
INDEX_VERSIONS = tuple(range(1, INDEX_VERSION + 1))  # the versions read
NO_MANIFEST = "reindexed without a manifest: finalizing never finished"
STALE_MANIFEST = (
    "reindexed with a manifest that does not cover this index.json: finalizing never finished"
)


class InvalidIndex(Exception):
    """A snapshot folder that cannot be restored; the message says why, in one line."""


@dataclass(frozen=True)
class CrawlRecord:
    """A crawl as index.json describes it (version 2), or as rebuilt from its snapshots (1)."""

    id: int
    seeds: tuple[str, ...]
    depth: int
    any_host: bool
    priority: int
    tags: tuple[str, ...]
    source_file: str
    created_at: datetime
    input_report: dict[str, Any] = field(default_factory=dict)  # optional in version 2
    politeness: dict[str, Any] = field(default_factory=dict)  # optional: Politeness fields
    stop_reason: str = ""  # optional: in the snapshots finalized after it stopped growing
    # Titles and tags the input gave its seeds: from each root snapshot's optional "given".
    seed_details: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class FolderIndex:
    """One snapshot folder, read and checked: the rows to create and the state to give them."""

    folder: Path
    version: int
    crawl: CrawlRecord | None  # None in version 1
    snapshot: dict[str, Any]  # Snapshot field values, but status, error and manifest_sha256
    tags: list[str]
    given: dict[str, Any] | None  # the seed's title and tags from the crawl's input
    parent_id: uuid.UUID | None
    results: list[dict[str, Any]]  # ArchiveResult field values
    status: str
    error: str
    manifest_sha256: str
    skipped: list[dict[str, str]] = field(default_factory=list)  # links left out: CrawlSkip


class _Object:
    """Typed access to one JSON object of index.json: a bad or missing value raises InvalidIndex
    naming its key. ``model_field`` runs that field's validators (length, range, URL)."""

    def __init__(self, value: Any, where: str = ""):
        if not isinstance(value, dict):
            raise InvalidIndex(f"{INDEX_NAME}{': ' if where else ''}{where} is not a JSON object")
        self.data, self.where = value, where

    def name(self, key: str) -> str:
        """Return ``key``'s place in the document, for messages: ``index.json: snapshot.url``."""
        return f"{INDEX_NAME}: {self.where}.{key}" if self.where else f"{INDEX_NAME}: {key}"

    def _get(self, key: str) -> Any:
        if key not in self.data:
            raise InvalidIndex(f"{self.name(key)} is missing")
        return self.data[key]

    def _check(self, key: str, value: Any, model_field) -> Any:
        if model_field is not None:
            try:
                model_field.run_validators(value)
            except ValidationError as error:
                shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
                raise InvalidIndex(
                    f"{self.name(key)} {shown}: {' '.join(error.messages)}"
                ) from None
        return value

    def _wrong(self, key: str, value: Any, expected: str) -> InvalidIndex:
        return InvalidIndex(f"{self.name(key)} is {type(value).__name__}, not {expected}")

    def text(self, key: str, model_field=None) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return self._check(key, value, model_field)

    def integer(self, key: str, model_field=None, *, nullable: bool = False) -> int | None:
        value = self._get(key)
        if value is None and nullable:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._wrong(key, value, "an integer")
        return self._check(key, value, model_field)

    def flag(self, key: str) -> bool:
        value = self._get(key)
        if not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value

    def uuid(self, key: str, *, nullable: bool = False) -> uuid.UUID | None:
        value = self._get(key)
        if value is None and nullable:
            return None
        try:
            return uuid.UUID(self.text(key))
        except ValueError:
            raise InvalidIndex(f"{self.name(key)} {value!r:.80} is not a snapshot id") from None

    def moment(self, key: str, *, nullable: bool = False) -> datetime | None:
        value = self._get(key)
        if value is None and nullable:
            return None
        try:
            moment = datetime.fromisoformat(self.text(key))
        except ValueError:
            raise InvalidIndex(f"{self.name(key)} {value!r:.80} is not an ISO 8601 time") from None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    def array(self, key: str) -> list:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._wrong(key, value, "a list")
        return value

    def texts(self, key: str, model_field=None) -> list[str]:
        values = self.array(key)
        for index, value in enumerate(values):
            if not isinstance(value, str) or not value:
                raise InvalidIndex(f"{self.name(key)}[{index}] is not a non-empty string")
            self._check(f"{key}[{index}]", value, model_field)
        return values

    def object(self, key: str) -> _Object:
        return _Object(self._get(key), f"{self.where}.{key}" if self.where else key)

    def optional_object(self, key: str) -> dict[str, Any]:
        """Return the JSON object at ``key`` as a dict, {} when the key is absent."""
        if key not in self.data:
            return {}
        return self.object(key).data


def _field(model, name: str):
    return model._meta.get_field(name)


def read_folder(folder: Path) -> FolderIndex:
    """Read and check ``folder/index.json`` and decide the snapshot's state from its manifest.

    A manifest that lists this very ``index.json`` means finalizing finished: ``sealed``, with
    the SHA-256 of the manifest file's bytes (the payload is not re-hashed; that is what fixity
    checks are for). No manifest, or one written before this ``index.json``: ``failed``.
    Raises InvalidIndex for a missing or unreadable file, bad JSON, an unknown version, a
    missing key, a value of the wrong type or one the model would refuse (URL, id, length).
    """
    raw, document, version = _load(folder)
    snapshot = document.object("snapshot")
    snapshot_id = snapshot.uuid("id")
    if folder.name != str(snapshot_id):
        raise InvalidIndex(f"{INDEX_NAME} describes snapshot {snapshot_id}, not {folder.name}")
    crawl_id = snapshot.integer("crawl_id", _field(Crawl, "id"))
    if crawl_id < 1:
        raise InvalidIndex(f"{snapshot.name('crawl_id')} {crawl_id} is not a crawl id")
    crawl = _read_crawl(document.object("crawl"), crawl_id) if version >= 2 else None
    priority = snapshot.integer("priority", _field(Snapshot, "priority")) if version >= 2 else 0
    created_at = snapshot.moment("created_at")
    start_ts = snapshot.moment("start_ts", nullable=True)
    results = _read_results(document, version, created_at=start_ts or created_at, priority=priority)
    ends = [result["end_ts"] for result in results if result["end_ts"]]
    status, error, manifest_sha256 = _state_from_manifest(folder, raw)
    return FolderIndex(
        folder=folder,
        version=version,
        crawl=crawl,
        snapshot={
            "id": snapshot_id,
            "crawl_id": crawl_id,
            "url": snapshot.text("url", _field(Snapshot, "url")),
            "title": snapshot.text("title", _field(Snapshot, "title")),
            "depth": snapshot.integer("depth", _field(Snapshot, "depth")),
            "priority": priority,
            "created_at": created_at,
            "start_ts": start_ts,
            # Sealing happens after index.json is written: the last result's end is the closest.
            "end_ts": max(ends, default=start_ts or created_at),
            "signed_by": _signer(document) if status == SnapshotStatus.SEALED else "",
        },
        tags=snapshot.texts("tags", _field(Tag, "name")),
        given=_given(snapshot),
        parent_id=snapshot.uuid("parent_id", nullable=True),
        results=results,
        status=status,
        error=error,
        manifest_sha256=manifest_sha256,
        skipped=_read_skipped(snapshot),
    )


def _load(folder: Path) -> tuple[bytes, _Object, int]:
    """Return ``folder/index.json``'s bytes, its parsed document and its version; raise
    InvalidIndex when the file cannot be read, is not JSON, or has a version this reader does
    not know (one from a newer Vellum says so)."""
    try:
        raw = (folder / INDEX_NAME).read_bytes()
    except FileNotFoundError:
        raise InvalidIndex(f"no {INDEX_NAME}") from None
    except OSError as error:
        raise InvalidIndex(f"cannot read {INDEX_NAME}: {error.strerror}") from None
    try:
        parsed = json.loads(raw)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise InvalidIndex(f"{INDEX_NAME} is not valid JSON: {error}") from None
    document = _Object(parsed)
    version = document.data.get("vellum_index_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidIndex(f"{INDEX_NAME} has no vellum_index_version: not a Vellum index")
    if version not in INDEX_VERSIONS:
        hint = " (written by a newer Vellum: upgrade Vellum to reindex it)"
        hint = hint if version > max(INDEX_VERSIONS) else ""
        raise InvalidIndex(f"{INDEX_NAME} has unsupported version {version}{hint}")
    return raw, document, version


def _given(snapshot: _Object) -> dict[str, Any] | None:
    """Return the title and tags the crawl's input gave a seed (optional ``given``), or None."""
    if snapshot.data.get("given") is None:
        return None
    given = snapshot.object("given")
    return {
        "title": given.text("title", _field(Snapshot, "title")),
        "tags": given.texts("tags", _field(Tag, "name")),
    }


def _signer(document: _Object) -> str:
    """Return the fingerprint of the key that signed the manifest (index.json's optional
    ``signing_key``, written since manifests are signed), or "" when it does not say."""
    if "signing_key" not in document.data:
        return ""
    return document.object("signing_key").text("fingerprint", _field(Snapshot, "signed_by"))


def _read_crawl(crawl: _Object, crawl_id: int) -> CrawlRecord:
    if crawl.integer("id") != crawl_id:
        raise InvalidIndex(f"{crawl.name('id')} is not the snapshot's crawl_id {crawl_id}")
    return CrawlRecord(
        id=crawl_id,
        seeds=(),  # not in index.json (it would copy every seed into every snapshot): see reindex
        depth=crawl.integer("depth", _field(Crawl, "depth")),
        any_host=crawl.flag("any_host"),
        priority=crawl.integer("priority", _field(Crawl, "priority")),
        tags=tuple(crawl.texts("tags", _field(Tag, "name"))),
        source_file=crawl.text("source_file", _field(Crawl, "source_file")),
        created_at=crawl.moment("created_at"),
        input_report=crawl.optional_object("input_report"),
        politeness=_read_politeness(crawl),
        stop_reason=crawl.text("stop_reason", _field(Crawl, "stop_reason"))
        if "stop_reason" in crawl.data
        else "",
    )


def _read_politeness(crawl: _Object) -> dict[str, Any]:
    """The crawl's politeness options (optional ``politeness``), each checked by its model
    field ({} when absent: the fields' defaults)."""
    if "politeness" not in crawl.data:
        return {}
    options = crawl.object("politeness")
    values = {}
    for name in POLITENESS_FIELDS:
        model_field = _field(Crawl, name)
        value = options._get(name)
        try:
            values[name] = model_field.clean(value, None)
        except ValidationError as error:
            raise InvalidIndex(
                f"{options.name(name)} {value!r:.80}: {' '.join(error.messages)}"
            ) from None
    return values


def _read_skipped(snapshot: _Object) -> list[dict[str, str]]:
    """The links the snapshot's page led to that its crawl left out (optional ``skipped``)."""
    if "skipped" not in snapshot.data:
        return []
    skipped = []
    for index, value in enumerate(snapshot.array("skipped")):
        entry = _Object(value, f"{snapshot.where}.skipped[{index}]")
        reason = entry.text("reason", _field(CrawlSkip, "reason"))
        if reason not in SkipReason.values:
            raise InvalidIndex(f"{entry.name('reason')} {reason!r:.80} is not a skip reason")
        skipped.append(
            {
                "url": entry.text("url", _field(CrawlSkip, "url")),
                "reason": reason,
                "detail": entry.text("detail", _field(CrawlSkip, "detail")),
            }
        )
    return skipped


def _read_results(
    document: _Object, version: int, *, created_at: datetime, priority: int
) -> list[dict[str, Any]]:
    results, seen = [], set()
    for index, value in enumerate(document.array("results")):
        result = _Object(value, f"results[{index}]")
        extractor = result.text("extractor", _field(ArchiveResult, "extractor"))
        if not extractor or extractor in seen:
            raise InvalidIndex(f"{result.name('extractor')} {extractor!r} is empty or repeated")
        seen.add(extractor)
        status = result.text("status")
        error = result.text("error")
        if status not in ResultStatus.values:
            raise InvalidIndex(f"{result.name('status')} {status!r:.40} is not a result state")
        if status not in ResultStatus.final():
            error = f"reindexed as failed: index.json recorded it {status}, never final" + (
                f" ({error})" if error else ""
            )
            status = ResultStatus.FAILED
        results.append(
            {
                "extractor": extractor,
                "status": status,
                "attempts": result.integer("attempts", _field(ArchiveResult, "attempts")),
                "cmd": result.array("cmd"),
                "cmd_version": result.text("cmd_version", _field(ArchiveResult, "cmd_version")),
                "exit_code": result.integer(
                    "exit_code", _field(ArchiveResult, "exit_code"), nullable=True
                ),
                "output": result.text("output", _field(ArchiveResult, "output")),
                "output_files": result.texts("output_files"),
                "output_size": result.integer("output_size", _field(ArchiveResult, "output_size")),
                "error": error,
                "start_ts": result.moment("start_ts", nullable=True),
                "end_ts": result.moment("end_ts", nullable=True),
                "history": result.array("history") if version >= 2 else [],
                "refused": result.texts("refused") if version >= 3 else [],
                "missing": _read_missing(result) if version >= 4 else [],
                "priority": priority,
                "created_at": created_at,
            }
        )
    return results


def _read_missing(result: _Object) -> list[dict[str, str]]:
    """Return a result's ``missing`` files: a list of ``{"url", "reason"}`` objects, each value
    a non-empty string (version 4)."""
    missing = []
    for index, value in enumerate(result.array("missing")):
        entry = _Object(value, f"{result.where}.missing[{index}]")
        url, reason = entry.text("url"), entry.text("reason")
        if not url or not reason:
            raise InvalidIndex(f"{entry.name('url' if not url else 'reason')} is empty")
        missing.append({"url": url, "reason": reason})
    return missing


def _state_from_manifest(folder: Path, index_bytes: bytes) -> tuple[str, str, str]:
    """Return ``(status, error, manifest_sha256)`` for the snapshot in ``folder``."""
    try:
        manifest = (folder / MANIFEST_NAME).read_bytes()
        listed = parse_manifest(manifest.decode("utf-8")).get(INDEX_NAME)
    except FileNotFoundError:
        return SnapshotStatus.FAILED, NO_MANIFEST, ""
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise InvalidIndex(f"cannot read {MANIFEST_NAME}: {reason}") from None
    if listed != hashlib.sha256(index_bytes).hexdigest():
        return SnapshotStatus.FAILED, STALE_MANIFEST, ""
    return SnapshotStatus.SEALED, "", hashlib.sha256(manifest).hexdigest()


def snapshot_index(snapshot: Snapshot, results: list[ArchiveResult]) -> dict:
    """Return the ``index.json`` document: enough to rebuild the snapshot's rows (DESIGN.md §1),
    and the public key that signs its manifest, so the folder can be checked on its own."""
    crawl = snapshot.crawl
    public_pem = public_key_pem()
    return {
        "vellum_index_version": INDEX_VERSION,
        "crawl": {
            "id": crawl.pk,
            "depth": crawl.depth,
            "any_host": crawl.any_host,
            "priority": crawl.priority,
            "tags": sorted(tag.name for tag in CRAWL_TAGS.records(crawl.pk)),
            "source_file": crawl.source_file,
            "created_at": crawl.created_at.isoformat(),
            "input_report": crawl.input_report,
            "politeness": crawl.politeness_options(),
            **({"stop_reason": crawl.stop_reason} if crawl.stop_reason else {}),
        },
        "snapshot": {
            "id": str(snapshot.pk),
            "url": snapshot.url,
            "title": snapshot.title,
            "crawl_id": snapshot.crawl_id,
            "depth": snapshot.depth,
            "parent_id": str(snapshot.parent_id) if snapshot.parent_id else None,
            "tags": sorted(snapshot.tag_names()),
            "priority": snapshot.priority,
            "created_at": snapshot.created_at.isoformat(),
            "start_ts": snapshot.start_ts.isoformat() if snapshot.start_ts else None,
            # The title and tags the crawl's input gave this seed URL, if any.
            "given": crawl.seed_given(snapshot.url) if snapshot.depth == 0 else None,
            **_unchanged_since(snapshot),
            **_skipped(snapshot),
        },
        "results": [_result_entry(result) for result in results],
        "signing_key": {
            "algorithm": "Ed25519",
            "fingerprint": key_fingerprint(public_pem),
            "public_key": public_pem,
        },
    }


def _unchanged_since(snapshot: Snapshot) -> dict:
    """``{"unchanged_since": id}`` for a capture that found an earlier one's page again (its
    crawl kept only changes: core/services/unchanged.py), else nothing."""
    if snapshot.unchanged_since_id is None:
        return {}
    return {"unchanged_since": str(snapshot.unchanged_since_id)}


def _skipped(snapshot: Snapshot) -> dict:
    """``{"skipped": [{"url", "reason", "detail"}, ...]}``: the links on the snapshot's page
    that its crawl left out (CrawlSkip), in URL order; nothing when there are none."""
    rows = SKIPPED_ON.records(snapshot.crawl_id, snapshot.url)
    skipped = [{"url": row.url, "reason": row.reason, "detail": row.detail} for row in rows]
    return {"skipped": skipped} if skipped else {}


def _crawl_tags(crawl_id: int) -> QuerySet:
    """The tags of crawl ``crawl_id``."""
    return Tag.objects.filter(crawls=crawl_id)


def _skipped_on(crawl_id: int, url: str) -> QuerySet:
    """The links crawl ``crawl_id`` left out of its page ``url``, by URL."""
    rows = CrawlSkip.objects.filter(crawl_id=crawl_id, found_on=url)
    return rows.order_by("url").only("url", "reason", "detail")


# What index.json reads of every snapshot as it is sealed, compiled once per process.
CRAWL_TAGS = Statement("tags of a crawl", _crawl_tags, (int,), actors=("snapshot",))
SKIPPED_ON = Statement(
    "links a crawl left out of a page", _skipped_on, (int, str), actors=("snapshot",)
)


def _result_entry(result: ArchiveResult) -> dict:
    return {
        "extractor": result.extractor,
        "status": result.status,
        "attempts": result.attempts,
        # A row recorded before redaction existed may still hold a credential: never publish it.
        "cmd": redact_command(result.cmd),
        "cmd_version": result.cmd_version,
        "exit_code": result.exit_code,
        "output": result.output,
        "output_files": result.output_files,
        "output_size": result.output_size,
        "error": result.error,
        "refused": result.refused,
        "missing": result.missing,
        "start_ts": result.start_ts.isoformat() if result.start_ts else None,
        "end_ts": result.end_ts.isoformat() if result.end_ts else None,
        # A run's entry carries its command; an event's ("revisits resolved") has none.
        "history": [
            {**run, "cmd": redact_command(run["cmd"])} if "cmd" in run else run
            for run in result.history
        ],
    }


def write_index(folder: Path, index: dict) -> None:
    """Write ``index`` as ``folder/index.json`` (UTF-8, sorted keys, indented)."""
    text = json.dumps(index, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    atomic_write(folder / INDEX_NAME, text.encode() + b"\n")
