"""Package snapshots' WARCs as WACZ (Web Archive Collection Zipped, spec 1.1.1) with py-wacz.

A snapshot's WACZ, ``snapshot.wacz`` at the root of its folder, holds the WARCs its extractors
wrote (``<extractor>/warc/*.warc.gz``), a page list naming the snapshot's page with its text
(for ReplayWeb.page's search), and its
screenshot as a WARC ``resource`` record, the way Browsertrix-crawler stores page screenshots
(``src/util/screenshots.ts``: record URI ``urn:<kind>:<page url>``, Content-Type ``image/png``,
dated like the page, in a WARC of its own). Our screenshot is a full-page capture, so its kind
is ``fullPage``; Browsertrix keeps ``view`` for a 1920x1080 viewport capture, which QA tools
compare pixel by pixel with a replay.

Replay plays what the browser fetched: the WARCs of the extractor with the highest
``replay_priority`` (the browser's recording, core/extractors/recording.py) go in whole, and the
others (wget's) only with the records of URLs those lack (``supplement_warc``), so that a page
the browser recorded is never replayed from wget's copy of it, and a file wget fetched that the
browser did not (a requisite of a ``<noscript>``, a link of the page) can still be replayed.

Several snapshots go into one WACZ the same way
(``package_wacz``), for a crawl export that another archive can load as one file.

py-wacz runs in a child process (it prints to stdout, and importing it takes ~0.55 s): one worker
per Vellum process, started on the first job and kept for the next (core/folder/pywacz_worker.py),
in its own process group and killed on timeout. One job both creates the WACZ and checks it with
py-wacz's validator; with the imports done once, a typical page takes some 0.03 s. The WACZ is
built in a temporary folder (``TEMP_PREFIX``) beside its destination and renamed into place only
once it passes, so a half-written or invalid WACZ never takes the place of a good one.

At packaging the validator runs all its checks (the required files, every file listed in
``datapackage.json`` with its hash, the package's digest) but one: frictionless's schema check of
``datapackage.json``, which py-wacz wrote a moment before, and which opened every resource to guess
its text encoding, half of the packaging time (py-spy, issue 19). ``validate_wacz`` (exports, the
tests) runs the whole validator.
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.timeutils import iso_date_to_timestamp, timestamp_to_iso_date
from warcio.warcwriter import WARCWriter

from core.extractors.registry import find_extractor
from core.folder.manifest import TEMP_PREFIX, payload_files
from core.folder.pywacz_worker import CHECK_CONTENTS, JobEnd, shared_worker
from core.folder.strict_warc import GZIP_MAGIC, RECORD_END

WACZ_NAME = "snapshot.wacz"
SCREENSHOT_PATH = "screenshot/screenshot.png"
# Browsertrix's name for the kind of screenshot we take (full page, not the viewport).
SCREENSHOT_KIND = "fullPage"
# Not gzipped: a PNG is compressed already, and deflating a tall page's full-page capture at
# warcio's level 9 was a third of finalizing's Python time (py-spy, issue 18) for no bytes saved.
SCREENSHOT_WARC = "screenshots.warc"
WARC_SUFFIXES = (".warc.gz", ".warc")
# Records a page can be replayed from (the ones py-wacz's indexer matches pages against).
PAGE_RECORD_TYPES = ("response", "resource", "revisit")
# WACZ 1.1.1, "pages/pages.jsonl": a header line, then one JSON object per page.
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
# How py-wacz's validator (wacz/validate.py) begins the lines that say why a WACZ is invalid.
REASON_PREFIXES = (
    "Datapackage is missing",
    "A warc file is missing",
    "An index file is missing",
    "Frictionless has detected",
    "file ",
    "datapackage.json hash mismatch",
    "Hashing type was unable",
    "Version missing",
    "Version not able",
)
VALIDATION_FAILED = "Validation failed"
FRICTIONLESS_ERRORS = "invalid package with errors"
MAX_REASON_CHARS = 600


class PackagingError(Exception):
    """A WACZ could not be made or did not validate; ``str()`` says why.

    ``temporary`` is True when another attempt may succeed: py-wacz ran past its timeout, or
    the system failed it (OSError: disk full, permissions, I/O error). It is False when py-wacz
    itself refused the input or its own output (an unreadable WARC, a WACZ its validator
    rejects): trying again gives the same result.
    """

    def __init__(self, message: str, *, temporary: bool) -> None:
        super().__init__(message)
        self.temporary = temporary


@dataclass(frozen=True)
class PageSource:
    """One snapshot to package: its folder, and its page as the page list names it.

    ``archived_at`` dates the page when its URL is not found in the WARCs (otherwise the
    capture's own WARC-Date does); the folder's name serves as the page's id.
    """

    folder: Path
    url: str
    title: str
    archived_at: datetime
    text: str = ""  # the page's text, for search in the page list ("" leaves it out)


def snapshot_warcs(folder: Path) -> list[Path]:
    """Return the WARCs the snapshot's extractors wrote: ``<extractor>/warc/*.warc[.gz]``, sorted.

    Only that depth counts: earlier runs' WARCs lie deeper (``history/<run>/<extractor>/warc/``),
    and so does a ``.warc.gz`` that wget saved in its mirror of the site, which is a file the
    site served, not our capture. Temporary files and folders (``TEMP_PREFIX``) and symbolic
    links are left out (core.folder.manifest.payload_files).
    """
    warcs = []
    for path in payload_files(folder):
        parts = path.relative_to(folder).parts
        if len(parts) == 3 and parts[1] == "warc" and path.name.endswith(WARC_SUFFIXES):
            warcs.append(path)
    return warcs


def warm_up_packaging() -> None:
    """Start this process's py-wacz worker in the background, so that the ~0.1 s of its imports
    pass while a snapshot's extractors run rather than when it is finalized."""
    shared_worker().warm_up()


def build_wacz(
    folder: Path, *, url: str, title: str, archived_at: datetime, timeout: float, text: str = ""
) -> Path | None:
    """Package the snapshot in ``folder`` as ``folder/snapshot.wacz``; return its path.

    The WACZ holds the snapshot's WARCs (``snapshot_warcs``, wget's supplementing the
    browser's: see the module docstring), a page list with its page (``url``, the capture's
    time, ``title``, ``text``) and, when ``screenshot/screenshot.png`` exists, a WARC holding
    it. Return None, removing an earlier ``snapshot.wacz``, when the
    snapshot has no WARC. Calling it again rebuilds the file. ``timeout`` bounds py-wacz, in
    seconds. Raise PackagingError (``temporary`` says whether to retry) when it fails, and
    CommandCancelled (core/extractors/process.py) when the actor is asked to stop meanwhile;
    the earlier file, if any, is then left as it was.
    """
    if not snapshot_warcs(folder):
        (folder / WACZ_NAME).unlink(missing_ok=True)
        return None
    return package_wacz(
        [PageSource(folder=folder, url=url, title=title, archived_at=archived_at, text=text)],
        folder / WACZ_NAME,
        title=title or url,
        description=f"Vellum snapshot of {url}",
        timeout=timeout,
    )


def package_wacz(
    sources: Sequence[PageSource],
    output: Path,
    *,
    title: str,
    description: str,
    timeout: float,
) -> Path | None:
    """Package the WARCs, pages and screenshots of ``sources`` as one WACZ at ``output``.

    Return ``output``, or None (writing nothing) when no source has a WARC. Each source's files
    go into the WACZ's ``archive/`` folder under names that start with its folder's name, so
    folder names must differ (ValueError otherwise). With one source whose URL is in its WARCs,
    the WACZ names it as its main page. ``output`` is replaced atomically, only by a WACZ that
    py-wacz's validator accepts (less the schema check, see above). Raise PackagingError as
    ``build_wacz`` does.
    """
    names = [source.folder.name for source in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"two sources share a folder name: {sorted(names)}")
    output = Path(os.path.abspath(output))  # py-wacz runs in another working folder
    try:
        # The input (links to the WARCs, the page list, the screenshots' WARC) is small and goes
        # in the system's temporary folder, which takes symbolic links where a destination
        # such as an exFAT disk may not; the WACZ is built beside ``output``.
        with _staging(output.parent) as staging, tempfile.TemporaryDirectory() as input_dir:
            staged = _stage(sources, Path(input_dir))
            if staged is None:
                return None
            inputs, pages_file, main_page = staged
            built = staging / "package.wacz"
            create = ["create", "-o", str(built), "--pages", str(pages_file), "--copy-pages"]
            create += ["--title", title, "--desc", description, *main_page]
            create += [str(path) for path in inputs]
            check = [CHECK_CONTENTS, str(built)]
            steps = _run_wacz([create, check], staging, timeout, True)
            _raise_for_failure(steps, what=f"packaging {output.name}")
            _fsync(built)
            os.replace(built, output)
    except OSError as error:
        raise PackagingError(f"packaging {output.name} failed: {error}", temporary=True) from error
    return output


def validate_wacz(path: Path, *, timeout: float) -> list[str]:
    """Return why py-wacz's validator rejects the WACZ at ``path`` ([] when it accepts it).

    Each problem is a line py-wacz printed (or the error it raised). Raise PackagingError when
    the validator cannot run to the end (timeout: ``temporary``).
    """
    return validate_waczs([path], timeout=timeout)[path]


def validate_waczs(paths: Sequence[Path], *, timeout: float) -> dict[Path, list[str]]:
    """Return ``{path: problems}`` for each WACZ, as ``validate_wacz``, validated in one process.

    ``timeout`` is per file (seconds); the temporary files py-wacz extracts go beside the first.
    """
    if not paths:
        return {}
    try:
        with _staging(paths[0].parent) as staging:
            commands = [["validate", "-f", os.path.abspath(path)] for path in paths]
            steps = _run_wacz(commands, staging, timeout * len(paths), False)
    except OSError as error:
        raise PackagingError(f"validating WACZ failed: {error}", temporary=True) from error
    problems = {}
    for number, path in enumerate(paths):
        step = steps.get(number)
        if step is None or step.exit_code is None:
            raise PackagingError(f"py-wacz stopped before validating {path.name}", temporary=True)
        problems[path] = [] if step.exit_code == 0 else step.problems()
    return problems


# --- staging -------------------------------------------------------------------------------------


@contextmanager
def _staging(parent: Path) -> Iterator[Path]:
    """Yield a new temporary folder in ``parent`` (same file system, so a rename into place is
    atomic), removed with all it holds when the block ends, however it ends."""
    folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}wacz-", dir=os.path.abspath(parent)))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stage(
    sources: Sequence[PageSource], input_dir: Path
) -> tuple[list[Path], Path, list[str]] | None:
    """Lay out py-wacz's input in ``input_dir``: links to the WARCs under unique names, a WARC of
    screenshots, and the page list. Return (WARCs, page list, main page arguments), or None
    when there is no WARC."""
    inputs, pages = [], []
    main_page: list[str] = []
    for source in sources:
        warcs = snapshot_warcs(source.folder)
        if not warcs:
            continue
        for warc in warcs:
            _refuse_unless_warc(warc)
        prefix = source.folder.name
        primary, others = _by_replay_priority(source.folder, warcs)
        for warc in primary:
            relative = warc.relative_to(source.folder).as_posix().replace("/", "-")
            link = input_dir / f"{prefix}-{relative}"
            # py-wacz stores each WARC under its base name; links give every one its own.
            link.symlink_to(warc.resolve())
            inputs.append(link)
        for warc in others:
            relative = warc.relative_to(source.folder).as_posix().replace("/", "-")
            kept = supplement_warc(warc, primary, input_dir / f"{prefix}-{relative}")
            inputs.extend([kept] if kept else [])
        captured = _capture_time(primary + others, source.url)
        ts = _iso(captured) if captured else _iso(source.archived_at)
        screenshot = source.folder / SCREENSHOT_PATH
        if screenshot.is_file():
            inputs.append(_screenshot_warc(screenshot, source.url, ts, input_dir / prefix))
        pages.append(
            {"id": prefix, "url": source.url, "ts": ts, "title": source.title, "text": source.text}
        )
        if len(sources) == 1 and captured:
            main_page = ["--url", _main_url(source.url), "--ts", iso_date_to_timestamp(captured)]
    if not inputs:
        return None
    pages_file = input_dir / "pages.jsonl"
    lines = [PAGES_HEADER, *({k: v for k, v in page.items() if v} for page in pages)]
    pages_file.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return inputs, pages_file, main_page


def _refuse_unless_warc(path: Path) -> None:
    """Raise PackagingError (permanent) unless ``path`` begins with a WARC record (ISO 28500
    §4: a ``WARC/1.x`` version line) and, when its name ends ``.gz``, is gzipped.

    py-wacz packages whatever it is given (warcio reads a text file as ARC records), and the
    schema check that used to refuse such a file no longer runs at packaging (see above).
    """
    try:
        with open(path, "rb") as stream:
            gzipped = stream.read(2) == GZIP_MAGIC
            stream.seek(0)
            first = next(iter(ArchiveIterator(stream)), None)
    except ArchiveLoadFailed as error:
        problem = f"warcio cannot read it ({error})"
    else:
        if first is None:
            problem = "it holds no record"
        elif first.format != "warc":
            problem = "it does not begin with a WARC/1.x record"
        elif path.name.endswith(".gz") and not gzipped:
            problem = "its name ends .gz, but it is not gzipped"
        else:
            return
    raise PackagingError(f"{path.name} is not a WARC file: {problem}", temporary=False)


def _by_replay_priority(folder: Path, warcs: list[Path]) -> tuple[list[Path], list[Path]]:
    """Split ``warcs`` into those of the extractors with the highest ``replay_priority``
    (core/extractors/base.py), which replay first, and the others."""

    def priority(warc: Path) -> int:
        extractor = find_extractor(warc.relative_to(folder).parts[0])
        return extractor.replay_priority if extractor else 0

    best = max(priority(warc) for warc in warcs)
    primary = [warc for warc in warcs if priority(warc) == best]
    return primary, [warc for warc in warcs if priority(warc) != best]


def supplement_warc(warc: Path, primary: list[Path], output: Path) -> Path | None:
    """Write to ``output`` (gzipped) the records of ``warc`` whose WARC-Target-URI no WARC of
    ``primary`` records, with its ``warcinfo`` and records that name no URI; return
    ``output``, or None (writing nothing) when no record of an http(s) URL is left (wget's
    records of its own log and arguments, ``metadata://`` URIs, do not count). A WARC that
    cannot be read is passed on whole, for py-wacz to say what is wrong with it.

    Records are copied byte for byte, so that their digests still hold: a gzipped WARC's
    records are its gzip members (one record each, as wget writes them: ISO 28500 Annex D),
    an uncompressed WARC's records are gzipped one by one.
    """
    recorded = _target_uris(primary)
    spans: list[tuple[int, int]] = []  # (offset, length) in ``warc`` of each record kept
    kept = 0
    try:
        with open(warc, "rb") as stream:
            gzipped = stream.read(2) == GZIP_MAGIC
            stream.seek(0)
            records = ArchiveIterator(stream)
            for record in records:
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if uri in recorded:
                    continue
                if record.rec_type in PAGE_RECORD_TYPES and _is_web_url(uri):
                    kept += 1
                spans.append((records.get_record_offset(), records.get_record_length()))
            if not kept:
                return None
            with open(output, "wb") as out:
                for offset, length in spans:
                    stream.seek(offset)
                    data = stream.read(length)
                    # warcio's span of an uncompressed record stops before the two CRLFs
                    # that end it (ISO 28500 §4); a gzip member holds them.
                    out.write(data if gzipped else gzip.compress(data + RECORD_END))
    except ArchiveLoadFailed:
        output.unlink(missing_ok=True)
        output.symlink_to(warc.resolve())
    return output


def _is_web_url(uri: str | None) -> bool:
    """True for an http(s) URL; False for none, or for a URI of the tool's own, such as the
    ``metadata://gnu.org/software/wget/warc/wget.log`` resource records wget writes."""
    return uri is not None and urlsplit(uri).scheme in ("http", "https")


def _target_uris(warcs: list[Path]) -> set[str]:
    """The URIs of the records in ``warcs`` that a page can be replayed from."""
    uris = set()
    for warc in warcs:
        with contextlib.suppress(ArchiveLoadFailed), open(warc, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in PAGE_RECORD_TYPES:
                    uris.add(record.rec_headers.get_header("WARC-Target-URI"))
    return uris


def _capture_time(warcs: list[Path], url: str) -> str | None:
    """Return the WARC-Date of the first record ``url`` can be replayed from, or None (also
    when that date cannot be read: the snapshot's own time then dates the page).

    Stops at the first match: the recording and wget write the page's own response first.
    """
    wanted = _main_url(url)
    for warc in warcs:
        try:
            with open(warc, "rb") as stream:
                for record in ArchiveIterator(stream):
                    if record.rec_type not in PAGE_RECORD_TYPES:
                        continue
                    if record.rec_headers.get_header("WARC-Target-URI") == wanted:
                        return _readable_date(record.rec_headers.get_header("WARC-Date"))
        except ArchiveLoadFailed:
            continue  # py-wacz reads it next and says what is wrong with it
    return None


def _readable_date(date: str | None) -> str | None:
    """``date`` if warcio can read it as a WARC-Date (ISO 28500 §5.4), else None."""
    try:
        iso_date_to_timestamp(date or "")
    except (ValueError, TypeError):
        return None
    return date or None


def _main_url(url: str) -> str:
    """Return ``url`` as py-wacz compares it with records: an empty path becomes ``/``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path or "/"))


def _iso(moment: str | datetime) -> str:
    """Return a WARC-Date or a datetime as the page list's ``ts``: UTC, to the second."""
    if isinstance(moment, str):
        return timestamp_to_iso_date(iso_date_to_timestamp(moment))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # Django stores UTC
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _screenshot_warc(screenshot: Path, url: str, ts: str, stem: Path) -> Path:
    """Write ``<stem>-screenshots.warc``: a warcinfo record, then the PNG as a WARC/1.1
    ``resource`` record ``urn:fullPage:<url>`` dated ``ts``, as Browsertrix-crawler does
    (uncompressed: see SCREENSHOT_WARC)."""
    path = stem.with_name(f"{stem.name}-{SCREENSHOT_WARC}")
    with open(path, "wb") as out, open(screenshot, "rb") as image:
        writer = WARCWriter(out, gzip=False, warc_version="WARC/1.1")
        info = {"software": "Vellum", "format": "WARC File Format 1.1"}
        writer.write_record(writer.create_warcinfo_record(path.name, info))
        record = writer.create_warc_record(
            f"urn:{SCREENSHOT_KIND}:{url}",
            "resource",
            payload=image,
            length=screenshot.stat().st_size,
            warc_content_type="image/png",
            warc_headers_dict={"WARC-Date": ts},
        )
        writer.write_record(record)
    return path


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


# --- running py-wacz -----------------------------------------------------------------------------


@dataclass
class _Step:
    """What one py-wacz command printed, and how it ended (None: it never ended)."""

    stdout: list[str]
    stderr: list[str]
    exit_code: int | None = None

    def problems(self) -> list[str]:
        """Return the lines that say what went wrong: the validator's reasons, then the error
        py-wacz raised (a traceback's last line names it: ``zipfile.BadZipFile: ...``)."""
        reasons: list[str] = []
        within = False  # a reason may go on for lines (frictionless prints a dict of errors)
        for line in self.stdout:
            if line.startswith(REASON_PREFIXES):
                reasons.append(line)
                within = True
            elif within and line and not line.startswith(VALIDATION_FAILED):
                reasons[-1] += " " + line
            else:
                within = False
        reasons = [_shorten(_frictionless_errors(reason)) for reason in reasons]
        raised = [line for line in self.stderr if line][-1:]
        return reasons + raised or self.stdout[-1:] or ["py-wacz failed without saying why"]


def _frictionless_errors(reason: str) -> str:
    """Return frictionless's report ("... with errors {'file': [{..., 'message': ...}]}") as
    "frictionless: <file>: <message>; ...", or ``reason`` as it is if it is not one."""
    _, found, errors = reason.partition(FRICTIONLESS_ERRORS)
    if not found:
        return reason
    try:
        # The errors print as a Python literal (pprint, with strings split across lines).
        by_file = ast.literal_eval(errors.strip())
        messages = [
            f"{name}: {error.get('message', error)}"
            for name, found_errors in by_file.items()
            for error in found_errors
        ]
    except (ValueError, SyntaxError, AttributeError, TypeError):
        return reason
    return "frictionless: " + "; ".join(messages) if messages else reason


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def _run_wacz(commands: list[list[str]], staging: Path, timeout: float, stop: bool) -> dict:
    """Run py-wacz ``commands`` in turn in this process's py-wacz worker
    (core/folder/pywacz_worker.py); return ``{number: _Step}``.

    ``stop`` ends the run at the first failing command. py-wacz's temporary files go in
    ``staging``, on the data's file system rather than a possibly small /tmp. Raise
    PackagingError if the run takes longer than ``timeout`` seconds (temporary), or if py-wacz
    cannot even start (not installed: permanent). A step whose ``exit_code`` is None never
    finished: the worker died (killed, out of memory).
    """
    mark = f"@@vellum-wacz-{secrets.token_hex(8)}"
    out_path, err_path = staging / "wacz.out", staging / "wacz.log"
    worker = shared_worker()
    end = worker.run(mark=mark, steps=commands, stop=stop, cwd=staging, stdout=out_path,
                     stderr=err_path, timeout=timeout)  # fmt: skip
    if end is JobEnd.TIMEOUT:
        raise PackagingError(f"py-wacz did not finish within {timeout:g} s", temporary=True)
    stdout, stderr = (_read(path) for path in (out_path, err_path))
    if mark not in stderr:
        last = worker.noise[-1:] or [f"its worker ended ({end.value})"]
        raise PackagingError(f"py-wacz could not start: {last[0]}", temporary=False)
    steps: dict[int, _Step] = {}
    for stream, text in (("stdout", stdout), ("stderr", stderr)):
        number = None
        for line in text.splitlines():
            if line.startswith(mark):
                words = line.split()
                number = int(words[1])
                step = steps.setdefault(number, _Step(stdout=[], stderr=[]))
                if len(words) == 4:  # "<mark> <number> exit <code>"
                    step.exit_code = int(words[3])
            elif number is not None:
                getattr(steps[number], stream).append(line.strip())
    return steps


def _read(path: Path) -> str:
    """Return what py-wacz wrote to ``path`` ("" when the worker died before opening it)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _raise_for_failure(steps: dict[int, _Step], *, what: str) -> None:
    """Raise PackagingError unless every step of a create-then-validate run succeeded."""
    for number in (0, 1):
        step = steps.get(number)
        if step is None or step.exit_code is None:
            # Killed mid-way (out of memory?): another attempt may pass; attempts are bounded.
            raise PackagingError(f"{what}: py-wacz stopped unexpectedly", temporary=True)
        if step.exit_code != 0:
            problems = step.problems()
            stage = "py-wacz could not create it" if number == 0 else "it does not validate"
            # A system error in the child (its traceback ends "OSError: [Errno 28] ...").
            temporary = any("[Errno " in line for line in problems)
            raise PackagingError(f"{what}: {stage}: {'; '.join(problems)}", temporary=temporary)
