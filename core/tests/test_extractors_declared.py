"""Extractors describe themselves (core/extractors/base.py): the integrity check, the snapshot
page, search and finalizing read what each registered extractor declares. An extractor defined
here and registered for one test is checked, shown, searched and titled without a line of those
modules naming it; and the default registry declares what those modules knew by name before."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.test import Client
from PIL import Image

from core.choices import ResultStatus, SnapshotStatus
from core.extractors import registry
from core.extractors.base import Extractor, Format, MainOutput, Output, ShownAs
from core.folder import formats
from core.folder.integrity import check_outputs, declared_outputs
from core.models import Snapshot, SnapshotText
from core.services.search import search_snapshot_ids, text_sources
from core.services.snapshots import snapshot_check_results
from core.tests.test_services import make_result, make_snapshot
from core.tests.users import staff_with

pytestmark = pytest.mark.django_db

OG_TITLE = "Vellum and parchment, a history"
OG_FILES = ["opengraph/image.png", "opengraph/description.txt", "opengraph/og.json"]


def names_a_title(path: Path) -> list[str]:
    """A check of the example extractor's own: og.json must give the page's og:title."""
    return [] if json.loads(path.read_bytes()).get("title") else ["gives no og:title"]


class OpenGraphExtractor(Extractor):
    """An extractor of this test's own: a page's Open Graph preview. Its main output is the
    og:title (a value); it keeps the preview image, the description and the tags it read."""

    name = "opengraph"
    main_output = MainOutput.VALUE
    outputs = (
        Output("image.png", Format.PNG),
        Output("description.txt", Format.UTF8),
        Output("og.json", names_a_title),
    )
    shown_as = ShownAs.VALUE
    search_text = "description.txt"
    search_text_priority = 2  # before readability's article
    gives_title = True


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.PUBLIC_ARCHIVE = False
    settings.PACKAGE_WACZ = False
    return tmp_path


def register(monkeypatch: pytest.MonkeyPatch, extractor: Extractor) -> Extractor:
    """Register ``extractor`` after the others, for one test; return it."""
    monkeypatch.setattr(registry, "EXTRACTORS", (*registry.EXTRACTORS, extractor))
    monkeypatch.setitem(registry.BY_NAME, extractor.name, extractor)
    return extractor


@pytest.fixture
def opengraph(monkeypatch: pytest.MonkeyPatch) -> Extractor:
    return register(monkeypatch, OpenGraphExtractor())


def reader() -> Client:
    """A client signed in as a user who may read snapshots."""
    client = Client()
    client.force_login(staff_with("keeper", "core.view_snapshot"))
    return client


def png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def write_opengraph(folder: Path, *, image: bytes | None = None, **texts: str) -> None:
    """Write the example extractor's files into the snapshot folder ``folder``: a sound set,
    with any of ``description`` and ``og`` (the og.json text) and ``image`` replaced."""
    files = {
        "image.png": png_bytes() if image is None else image,
        "description.txt": texts.get("description", "Scraped calfskin for medieval books.\n"),
        "og.json": texts.get("og", json.dumps({"title": OG_TITLE})),
    }
    for name, data in files.items():
        path = folder / "opengraph" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)


def opengraph_problems(folder: Path, *, output: str = OG_TITLE) -> list[str]:
    return check_outputs(folder, extractor="opengraph", output=output, output_files=OG_FILES)


# --- integrity -----------------------------------------------------------------------------------


def test_integrity_checks_a_new_extractors_declared_outputs(
    tmp_path: Path, opengraph: Extractor
) -> None:
    write_opengraph(tmp_path)
    assert opengraph_problems(tmp_path) == []  # a value for main output: no file is asked for

    write_opengraph(tmp_path, image=b"GIF89a", description="", og="{}")

    assert opengraph_problems(tmp_path) == [
        "opengraph/image.png: not a PNG image",
        "empty: opengraph/description.txt",
        "opengraph/og.json: gives no og:title",
    ]


def test_unregistered_the_same_files_are_only_checked_for_existence(tmp_path: Path) -> None:
    write_opengraph(tmp_path, image=b"GIF89a", og="{}")

    # Its main output is then taken for a file, as any unknown extractor's.
    assert opengraph_problems(tmp_path) == [f"missing: opengraph/{OG_TITLE}"]
    assert opengraph_problems(tmp_path, output="image.png") == []


def test_every_format_an_output_may_name_has_a_check() -> None:
    assert set(formats.FORMAT_CHECKS) == set(Format)


# --- the snapshot page, search, the title --------------------------------------------------------


def sealed_opengraph_snapshot() -> Snapshot:
    """A snapshot whose one result is the example extractor's, sealed through finalizing."""
    snapshot = make_snapshot("http://a.example/vellum")
    write_opengraph(snapshot.output_dir)
    htmltotext = snapshot.output_dir / "htmltotext" / "output.txt"
    htmltotext.parent.mkdir(parents=True)
    htmltotext.write_text("Menu Home Contact. The whole page, not its description.\n")
    make_result(
        snapshot, "opengraph", ResultStatus.SUCCEEDED, output=OG_TITLE,
        output_files=OG_FILES, attempts=1, retry_at=None,
    )  # fmt: skip
    snapshot_check_results(snapshot=snapshot)
    return Snapshot.objects.get(pk=snapshot.pk)


def test_a_new_extractor_titles_and_feeds_search(opengraph: Extractor) -> None:
    snapshot = sealed_opengraph_snapshot()

    assert (snapshot.status, snapshot.title) == (SnapshotStatus.SEALED, OG_TITLE)
    assert "calfskin" in SnapshotText.objects.get(snapshot=snapshot).text
    assert search_snapshot_ids("calfskin") == [snapshot.pk]
    assert search_snapshot_ids("contact") == []  # its text came first; htmltotext's was not read


def test_the_snapshot_page_shows_a_new_extractors_output_as_it_declares(
    opengraph: Extractor,
) -> None:
    snapshot = sealed_opengraph_snapshot()

    response = reader().get(f"/snapshot/{snapshot.pk}/")

    (output,) = response.context["outputs"]
    assert (output["known"], output["kind"]) == (True, "value")
    page = response.content.decode()
    assert f"<p>{OG_TITLE}</p>" in page
    assert f"/archive/{snapshot.pk}/opengraph/image.png" in page


class PreviewImageExtractor(Extractor):
    """Another extractor of this test's own: the page's preview image, shown as an image, and
    the index's thumbnail when no screenshot (registered first) succeeded."""

    name = "preview"
    outputs = (Output("preview.png", Format.PNG),)
    shown_as = ShownAs.IMAGE
    index_image = "thumbnail"


def test_the_pages_show_a_new_extractors_image_where_it_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register(monkeypatch, PreviewImageExtractor())
    snapshot = make_snapshot("http://a.example/preview")
    image = snapshot.output_dir / "preview" / "preview.png"
    image.parent.mkdir(parents=True)
    image.write_bytes(png_bytes())
    make_result(
        snapshot, "preview", ResultStatus.SUCCEEDED, output="preview.png",
        output_files=["preview/preview.png"], attempts=1, retry_at=None,
    )  # fmt: skip
    snapshot_check_results(snapshot=snapshot)
    client = reader()
    url = f"/archive/{snapshot.pk}/preview/preview.png"

    (row,) = client.get("/").context["rows"]
    page = client.get(f"/snapshot/{snapshot.pk}/").content.decode()

    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.SEALED
    assert (row["thumbnail"], row["favicon"]) == (url, None)
    assert f'<img class="shot" src="{url}" alt="preview"' in page


def test_search_reads_the_registered_extractors_text_best_first(opengraph: Extractor) -> None:
    assert text_sources() == [
        "opengraph/description.txt",
        "readability/content.txt",
        "htmltotext/output.txt",
    ]


# --- what the default extractors declare ---------------------------------------------------------


def test_the_default_extractors_declare_what_those_modules_knew_by_name() -> None:
    """The tables integrity.py, pages.py, search.py and finalizing.py held before issue 17."""
    assert [(pattern, str(check)) for pattern, check in declared_outputs()] == [
        ("headers/headers.json", "json"),
        ("wget/warc/*.warc.gz", "warc"),
        ("wget/warc/*.warc", "warc"),
        ("title/title.txt", "utf-8"),
        ("htmltotext/output.txt", "utf-8"),
        ("outlinks/outlinks.json", "json"),
        ("screenshot/screenshot.png", "png"),
        ("pdf/output.pdf", "pdf"),
        ("dom/output.html", "utf-8"),
        ("singlefile/singlefile.html", "utf-8"),
        ("recording/warc/*.warc.gz", "warc"),
        ("readability/article.json", "json"),
        ("readability/content.html", "utf-8"),
        ("readability/content.txt", "utf-8"),
    ]
    by_kind = {e.name: e.main_output for e in registry.EXTRACTORS if e.main_output != "file"}
    assert by_kind == {"title": MainOutput.VALUE, "git": MainOutput.DIRECTORY}
    shown = {e.name: e.shown_as for e in registry.EXTRACTORS if e.shown_as != ShownAs.LINK}
    assert shown == {"screenshot": "image", "favicon": "image", "title": "value"}
    images = {e.index_image: e.name for e in registry.EXTRACTORS if e.index_image}
    assert images == {"favicon": "favicon", "thumbnail": "screenshot"}
    assert text_sources() == ["readability/content.txt", "htmltotext/output.txt"]
    assert [e.name for e in registry.EXTRACTORS if e.gives_title] == ["title"]
