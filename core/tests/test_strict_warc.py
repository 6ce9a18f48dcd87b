"""The strict WARC reader (core/folder/strict_warc.py) reads nothing otherwise than warcio.

Real WARCs (wget's from the test site, warcio's WARCWriter's, one rewritten with revisits) are
read by both, record by record. Then many corruptions of them, at the gzip level and inside the
records, are read by both: wherever the strict reader reads a file at all, warcio finds it sound
and reads the same records; wherever it does not, ``check_warc`` gives warcio's own problems.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator

from core.extractors.wget import WARC_PATH, WgetExtractor
from core.folder import strict_warc
from core.folder.formats import check_warc, check_warc_with_warcio
from core.folder.revisits import Original, ToRevisit, _scan_with_warcio, rewrite_warc, scan_warc
from core.folder.strict_warc import read_strict_warc
from core.tests.site import LiveSite
from core.tests.test_integrity import warc_bytes

# --- real WARCs ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wget_plain_warc(live_site: LiveSite, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The WARC wget writes, uncompressed, of the test site's home page and its requisites."""
    out_dir = tmp_path_factory.mktemp("wget")
    output = WgetExtractor().run(SimpleNamespace(url=live_site.url("/")), out_dir)
    assert output.exit_code == 0, output.error
    return (out_dir / WARC_PATH).read_bytes()


@pytest.fixture(scope="module")
def wget_warc(wget_plain_warc: bytes, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """wget's WARC as finalizing packs it: gzipped, one member per record."""
    folder = tmp_path_factory.mktemp("packed")
    (folder / "archive.warc").write_bytes(wget_plain_warc)
    rewrite_warc(folder / "archive.warc", {}, output=folder / "archive.warc.gz")
    return (folder / "archive.warc.gz").read_bytes()


def revisit_warc(tmp_path: Path) -> bytes:
    """warcio's WARC with its first response rewritten as a revisit (core/folder/revisits.py)."""
    path = tmp_path / "source.warc.gz"
    path.write_bytes(warc_bytes())
    response = next(r for r in scan_warc(path) if r.rec_type == "response")
    original = Original(
        record_id="<urn:uuid:00000000-0000-0000-0000-000000000001>",
        target_uri=response.target_uri,
        warc_date="2026-01-01T00:00:00Z",
    )
    rewrite_warc(path, {response.record_id: ToRevisit(original)})
    return path.read_bytes()


def warcio_records(path: Path) -> list[dict]:
    """What warcio reads of each record: the reference."""
    records = []
    with open(path, "rb") as stream:
        iterator = ArchiveIterator(stream)
        for record in iterator:
            http = record.http_headers
            payload = None
            if http is not None:
                data = record.raw_stream.read()
                payload = (len(data), hashlib.sha256(data).hexdigest())
            headers = record.rec_headers
            records.append(
                {
                    "headers": {name.lower(): value for name, value in headers.headers},
                    "offset": iterator.get_record_offset(),
                    "type": record.rec_type,
                    "id": headers.get_header("WARC-Record-ID"),
                    "uri": headers.get_header("WARC-Target-URI") or "",
                    "date": headers.get_header("WARC-Date"),
                    "status": http.get_statuscode()
                    if http and record.rec_type == "response"
                    else None,
                    "payload": payload,
                }
            )
            if len(records) > 1:
                records[-2]["length"] = iterator.get_record_offset() - records[-2]["offset"]
    if records:
        records[-1]["length"] = path.stat().st_size - records[-1]["offset"]
    return records


def strict_records(path: Path) -> list[dict] | None:
    read = read_strict_warc(path)
    if read is None:
        return None
    return [
        {
            "headers": dict(record.headers),
            "offset": record.offset,
            "length": record.length,
            "type": record.rec_type,
            # "" for a field not there, where warcio gives None (the callers read both alike)
            "id": record.header("WARC-Record-ID") or None,
            "uri": record.header("WARC-Target-URI"),
            "date": record.header("WARC-Date") or None,
            "status": record.http_status,
            "payload": None
            if record.payload_sha256 is None
            else (record.payload_length, record.payload_sha256),
        }
        for record in read
    ]


@pytest.mark.parametrize("kind", ["wget", "wget uncompressed", "warcio", "revisits"])
def test_the_strict_reader_reads_real_warcs_as_warcio_does(
    kind: str, wget_warc: bytes, wget_plain_warc: bytes, tmp_path: Path
) -> None:
    data = {"wget": wget_warc, "wget uncompressed": wget_plain_warc, "warcio": warc_bytes(),
            "revisits": None}[kind]  # fmt: skip
    path = tmp_path / ("archive.warc" if kind == "wget uncompressed" else "archive.warc.gz")
    path.write_bytes(data if data is not None else revisit_warc(tmp_path))

    read = strict_records(path)

    assert read is not None, "a WARC Vellum's tools write must take the quick path"
    assert read == warcio_records(path)
    assert check_warc(path) == check_warc_with_warcio(path) == []
    assert scan_warc(path) == _scan_with_warcio(path)


def test_wget_s_responses_read_with_their_status_and_payload(
    wget_warc: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "archive.warc.gz"
    path.write_bytes(wget_warc)

    responses = [record for record in read_strict_warc(path) if record.rec_type == "response"]

    assert responses and all(record.http_status == "200" for record in responses)
    assert all(record.payload_length and record.payload_sha256 for record in responses)
    # wget writes the target URI in angle brackets; warcio and this reader give it without
    assert b"WARC-Target-URI: <http" in gzip.decompress(wget_warc)
    assert all(record.header("WARC-Target-URI").startswith("http") for record in responses)


# --- corruptions ---------------------------------------------------------------------------------


def members(data: bytes) -> list[bytes]:
    """The decompressed members of a gzip file of one record per member."""
    return [gzip.decompress(part) for part in _split_members(data)]


def _split_members(data: bytes) -> list[bytes]:
    parts, offset = [], 0
    while offset < len(data):
        decompressor = zlib.decompressobj(31)
        decompressor.decompress(data[offset:])
        end = len(data) - len(decompressor.unused_data)
        parts.append(data[offset:end])
        offset = end
    return parts


def joined(records: list[bytes]) -> bytes:
    return b"".join(gzip.compress(record) for record in records)


def _edit_first(records: list[bytes], kind: bytes, edit) -> list[bytes]:
    """``records`` with ``edit`` applied to the first whose WARC-Type is ``kind``."""
    for index, record in enumerate(records):
        if b"WARC-Type: " + kind + b"\r\n" in record:
            return [*records[:index], edit(record), *records[index + 1 :]]
    raise AssertionError(f"no {kind!r} record")


def _in_block(record: bytes, old: bytes, new: bytes) -> bytes:
    """``record`` with ``old`` replaced once in its block, and its block digest made to match
    again: a record that is sound, but of a shape the strict reader leaves to warcio."""
    head, separator, block = record.partition(b"\r\n\r\n")
    block = block[:-4].replace(old, new, 1)
    digest = base64.b32encode(hashlib.sha1(block).digest())
    head = re.sub(rb"(WARC-Block-Digest: sha1:)[A-Z2-7]+", rb"\g<1>" + digest, head)
    head = re.sub(rb"(Content-Length: )\d+", rb"\g<1>" + str(len(block)).encode(), head)
    return head + separator + block + b"\r\n\r\n"


def _content_length(record: bytes, change: int) -> bytes:
    found = re.search(rb"Content-Length: (\d+)", record)
    length = int(found.group(1)) + change
    return record[: found.start(1)] + str(length).encode() + record[found.end(1) :]


# Bytes that make a line blank for warcio, which strips each head line as text (bytes.rstrip()
# keeps the last two): warcio ends an HTTP head at a line of one of them.
WHITESPACE = {"a form feed": b"\x0c", "a no-break space": b"\xa0", "a file separator": b"\x1c"}


def corruptions(data: bytes) -> dict[str, bytes]:
    """Variants of the gzip WARC ``data``, each wrong (or merely unusual) in one way."""
    records = members(data)
    response, request = b"response", b"request"
    variants = {
        "cut in the last member": data[:-7],
        "cut between members": b"".join(_split_members(data)[:-1]),
        "trailing junk": data + b"junk",
        "trailing empty member": data + gzip.compress(b""),
        "one member for all": gzip.compress(b"".join(records)),
        "uncompressed": b"".join(records),
        "two records in a member": joined([records[0] + records[1], *records[2:]]),
        "payload byte changed": joined(
            _edit_first(records, response, lambda r: r[:-10] + bytes([r[-10] ^ 1]) + r[-9:])
        ),
        "content length short": joined(
            _edit_first(records, response, lambda r: _content_length(r, -1))
        ),
        "content length long": joined(
            _edit_first(records, response, lambda r: _content_length(r, +1))
        ),
        "bare LF in the HTTP head": joined(
            _edit_first(records, response, lambda r: _in_block(r, b"\r\n", b"\n"))
        ),
        "blank line of spaces in the HTTP head": joined(
            _edit_first(records, request, lambda r: _in_block(r, b"\r\n", b"\r\n   \r\n"))
        ),
        "LF LF in the HTTP head": joined(
            _edit_first(records, response, lambda r: _in_block(r, b"\r\n", b"\n\n\r\n"))
        ),
        "no-break space after the WARC-Type": joined(
            _edit_first(
                records,
                response,
                lambda r: r.replace(b"WARC-Type: response", b"WARC-Type: response\xc2\xa0"),
            )
        ),
        "no target URI": joined(
            _edit_first(
                records, response, lambda r: re.sub(rb"WARC-Target-URI: [^\r]*\r\n", b"", r)
            )
        ),
        "wrong payload digest": joined(
            _edit_first(
                records,
                response,
                lambda r: re.sub(rb"(Payload-Digest: sha1:)[A-Z2-7]{32}", rb"\g<1>" + b"A" * 32, r),
            )
        ),
        "continuation line in the WARC head": joined(
            _edit_first(
                records,
                response,
                lambda r: r.replace(b"\r\nWARC-Date:", b"\r\n\tx\r\nWARC-Date:", 1),
            )
        ),
        "repeated field": joined(
            _edit_first(
                records,
                response,
                lambda r: r.replace(b"\r\nWARC-Type:", b"\r\nWARC-Type: request\r\nWARC-Type:", 1),
            )
        ),
        "digest in upper-case algorithm": joined(
            _edit_first(records, response, lambda r: r.replace(b": sha1:", b": SHA1:"))
        ),
        "digest in base16": joined(
            _edit_first(records, response, lambda r: _base16_block_digest(r))
        ),
        "WARC/0.18": joined(_edit_first(records, response, lambda r: b"WARC/0.18" + r[8:])),
        "no WARC-Type": joined(
            _edit_first(records, response, lambda r: r.replace(b"WARC-Type: ", b"X-Type: ", 1))
        ),
        "status line not HTTP": joined(
            _edit_first(records, response, lambda r: _in_block(r, b"HTTP/1.", b"HTTX/1."))
        ),
        "space in the target URI": joined(
            _edit_first(
                records, response, lambda r: re.sub(rb"(WARC-Target-URI: \S+)", rb"\1 x", r)
            )
        ),
    }
    for space, byte in WHITESPACE.items():
        line = b"\r\n" + byte + b"\r\n"
        variants[f"line of {space} in the HTTP head"] = joined(
            _edit_first(records, response, lambda r, line=line: _in_block(r, b"\r\n", line))
        )
    step = max(len(data) // 23, 1)
    for offset in range(3, len(data), step):
        variants[f"cut at {offset}"] = data[:offset]
        variants[f"byte {offset} flipped"] = (
            data[:offset] + bytes([data[offset] ^ 0x55]) + data[offset + 1 :]
        )
    return variants


def outcome(read, path: Path) -> tuple[str, object]:
    """What ``read(path)`` returns, or the type of what it raises: warcio's readers raise on some
    malformed records (no target URI: AttributeError), and the quick path must raise alike."""
    try:
        return "returned", read(path)
    except Exception as error:  # compared, not swallowed: the test fails on any difference
        return "raised", type(error)


def _base16_block_digest(record: bytes) -> bytes:
    found = re.search(rb"WARC-Block-Digest: sha1:([A-Z2-7]{32})", record)
    hex_value = base64.b32decode(found.group(1)).hex().encode()
    return record[: found.start(1)] + hex_value + record[found.end(1) :]


@pytest.mark.parametrize("source", ["wget", "warcio"])
def test_no_corruption_is_read_otherwise_than_warcio_reads_it(
    source: str, wget_warc: bytes, tmp_path: Path
) -> None:
    data = wget_warc if source == "wget" else warc_bytes()
    path = tmp_path / "archive.warc.gz"
    boundaries, offset = [], 0
    for member in _split_members(data):
        offset += len(member)
        boundaries.append(offset)
    quick = []
    for name, variant in corruptions(data).items():
        path.write_bytes(variant)
        reference = check_warc_with_warcio(path)

        assert check_warc(path) == reference, name
        assert outcome(scan_warc, path) == outcome(_scan_with_warcio, path), name
        if name == "no target URI":  # warcio's scan raises: so must the quick path's caller
            assert outcome(scan_warc, path)[0] == "raised"
        read = strict_records(path)
        if read is not None:  # read quickly: then warcio finds it sound and reads the same
            quick.append(name)
            assert reference == [], name
            assert read == warcio_records(path), name
            if name != "uncompressed":  # the same records, not gzipped: read as wget's are
                assert variant == data[: len(variant)] and len(variant) in boundaries, name
    assert "cut between members" in quick  # the one a reader cannot tell from a whole file


def test_no_corruption_of_an_uncompressed_warc_is_read_otherwise_than_by_warcio(
    wget_plain_warc: bytes, tmp_path: Path
) -> None:
    data, path = wget_plain_warc, tmp_path / "archive.warc"
    longer = data.replace(b"Content-Length: ", b"Content-Length: 1", 1)
    variants = {"a record's length made longer": longer}
    for offset in range(3, len(data), max(len(data) // 29, 1)):
        variants[f"cut at {offset}"] = data[:offset]
        variants[f"byte {offset} flipped"] = (
            data[:offset] + bytes([data[offset] ^ 0x55]) + data[offset + 1 :]
        )
    for name, variant in variants.items():
        path.write_bytes(variant)
        reference = check_warc_with_warcio(path)

        assert check_warc(path) == reference, name
        # No gzip CRC here: a flipped byte of a WARC header line (its date, say) is no
        # digest's, and neither reader can tell. Read quickly, warcio reads the same.
        read = strict_records(path)
        if read is not None:
            assert reference == [], name
            assert read == warcio_records(path), name


def test_a_file_over_the_size_limit_is_left_to_warcio(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "archive.warc.gz"
    path.write_bytes(warc_bytes())
    assert read_strict_warc(path) is not None

    monkeypatch.setattr(strict_warc, "MAX_FILE_BYTES", path.stat().st_size - 1)

    assert read_strict_warc(path) is None  # the size is looked at before the memo
    assert check_warc(path) == []  # warcio reads it, and finds it sound


def test_a_member_over_the_size_limit_is_left_to_warcio(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "archive.warc.gz"
    path.write_bytes(warc_bytes(body_size=50_000))
    monkeypatch.setattr(strict_warc, "_last_read", None)
    monkeypatch.setattr(strict_warc, "MAX_MEMBER_BYTES", 40_000)

    assert read_strict_warc(path) is None
    assert check_warc(path) == []


@pytest.fixture(params=["bytes", "digest"])
def memo(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are known again by their bytes (up to KEPT_BYTES), or by a digest (here: all)."""
    if request.param == "digest":
        monkeypatch.setattr(strict_warc, "KEPT_BYTES", 0)


@pytest.mark.usefixtures("memo")
def test_the_same_bytes_read_again_give_the_records_read_before(tmp_path: Path) -> None:
    path = tmp_path / "archive.warc.gz"
    path.write_bytes(warc_bytes())
    first = read_strict_warc(path)
    assert first is not None

    path.write_bytes(path.read_bytes())  # rewritten, the same bytes

    assert read_strict_warc(path) is first


@pytest.mark.usefixtures("memo")
def test_a_file_changed_in_place_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "archive.warc.gz"
    sound = warc_bytes()
    path.write_bytes(sound)
    assert read_strict_warc(path) is not None

    # Same path, same size, within the same timestamp tick: only the bytes tell.
    path.write_bytes(sound[:-40] + bytes([sound[-40] ^ 0x55]) + sound[-39:])

    assert read_strict_warc(path) is None
    assert check_warc(path) != []
