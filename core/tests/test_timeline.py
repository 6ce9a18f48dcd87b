"""A URL's timeline page, the diff page, Memento (TimeGate, TimeMap, headers on the snapshot
page), the captures API and ``manage.py list --url`` (core/web/timeline.py, memento.py,
core/api.py), with captures made by hand (test_timeline_pipeline.py archives them for real)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from requests.utils import parse_header_links

from core.choices import SnapshotStatus
from core.services.captures import page_text_digest
from core.services.tokens import token_create
from core.tests.test_captures import T0, URL, capture, notice
from core.tests.users import keeper, staff_with
from core.web.memento import memento_headers

pytestmark = pytest.mark.django_db

SERVER = "http://testserver"


@pytest.fixture(autouse=True)
def private_archive(data_dir, settings) -> None:
    settings.PUBLIC_ARCHIVE = False


@pytest.fixture
def reader() -> Client:
    client = Client()
    client.force_login(staff_with("reader", "core.view_snapshot"))
    return client


@pytest.fixture
def three(db) -> list:
    """Three sealed captures of URL over two months, the third changed, with screenshots."""
    return [
        capture(T0, notice("forty"), screenshot={}),
        capture(T0 + timedelta(days=1), notice("forty"), screenshot={}),
        capture(
            T0 + timedelta(days=40), notice("fifty"), screenshot={"square": (100, 50, 119, 59)}
        ),
    ]


def timeline(url: str = URL) -> str:
    return reverse("core:url_timeline", kwargs={"url": url})


def html(response) -> BeautifulSoup:
    return BeautifulSoup(response.content, "html.parser")


def rows(response) -> list:
    return html(response).select("tr.capture")


def text(element) -> str:
    return " ".join(element.get_text(" ").split())


# --- the timeline --------------------------------------------------------------------------------


def test_the_timeline_lists_every_capture_newest_first_by_month(
    reader, three, django_assert_max_num_queries
) -> None:
    first, second, third = three
    with django_assert_max_num_queries(8):
        response = reader.get(timeline())

    assert response.status_code == 200
    page = html(response)
    assert [row["id"] for row in rows(response)] == [
        f"capture-{s.pk}" for s in (third, second, first)
    ]
    assert [text(h) for h in page.select("h2.month")] == [
        "April 2024 1 capture",
        "March 2024 2 captures",
    ]
    calendar = {a["href"]: text(a) for a in page.select(".calendar td.some a")}
    assert calendar == {"#m-2024-04": "Apr 1", "#m-2024-03": "Mar 2"}
    newest, middle, oldest = rows(response)
    assert "2024-04-14 10:00:00" in text(newest) and "sealed" in text(newest)
    assert "text changed" in text(newest)
    assert "unchanged since 2024-03-05 10:00:00" in text(middle)
    assert "first capture" in text(oldest)
    thumbnail = oldest.select_one("img.thumb")["src"]
    assert thumbnail == reverse("core:snapshot_file", args=[first.pk, "screenshot/screenshot.png"])
    assert reader.get(thumbnail).status_code == 200
    diff = newest.select_one("a.diff")["href"]
    assert diff == reverse(
        "core:url_diff", kwargs={"url": URL, "before": second.pk, "after": third.pk}
    )
    assert not oldest.select("a.diff")


def test_the_timeline_shows_captures_in_every_state_with_their_size() -> None:
    client = Client()
    client.force_login(keeper())
    capture(T0, notice("forty"))
    capture(T0 + timedelta(hours=1), status=SnapshotStatus.FAILED)

    newest, oldest = rows(client.get(timeline()))

    assert "failed" in text(newest) and "—" not in text(newest)
    assert f"{len(notice('forty'))} bytes" in text(oldest)


@pytest.mark.parametrize(
    "path",
    [
        "/url/https://news.example/notice",
        "/url/https:/news.example/notice",  # a proxy merged the slashes
        "/url/news.example/notice",
        "/url/HTTPS://NEWS.EXAMPLE/notice#fragment",
    ],
)
def test_the_timeline_takes_the_url_as_people_and_proxies_spell_it(reader, three, path) -> None:
    assert len(rows(reader.get(path))) == 3


def test_a_url_with_a_query_string_has_its_own_timeline(reader) -> None:
    search = "https://news.example/search?q=vellum&page=2"
    capture(T0, url=search)
    capture(T0, url="https://news.example/search")

    assert len(rows(reader.get("/url/https://news.example/search?q=vellum&page=2"))) == 1
    made_here = timeline(search)
    assert "%3F" in made_here
    assert len(rows(reader.get(made_here))) == 1


def test_a_url_never_archived_is_a_404_page_saying_so(reader, three) -> None:
    response = reader.get("/url/https://news.example/never")

    assert response.status_code == 404
    assert "Never archived" in response.content.decode()
    assert "no capture of <code>https://news.example/never</code>" in response.content.decode()


@pytest.mark.parametrize("path", ["/url/ftp://news.example/", "/url/https://", "/url/http://a b/"])
def test_what_is_not_a_url_is_a_400_page_saying_why(reader, path) -> None:
    response = reader.get(path)

    assert response.status_code == 400
    assert "Not a URL Vellum can look up" in response.content.decode()


def test_the_timeline_and_its_diffs_need_the_readers_permission(three) -> None:
    first, _second, third = three
    pages = [
        timeline(),
        reverse("core:url_diff", kwargs={"url": URL, "before": first.pk, "after": third.pk}),
        reverse("core:timemap", kwargs={"url": URL}),
        reverse("core:timegate", kwargs={"url": URL}),
    ]
    clerk = Client()
    clerk.force_login(staff_with("clerk", "crawls.view_crawl"))
    for page in pages:
        anonymous = Client().get(page)
        assert anonymous.status_code == 302
        assert anonymous["Location"].startswith("/login/?next=")
        assert clerk.get(page).status_code == 403


def test_every_snapshot_on_the_index_links_to_its_timeline(reader, three) -> None:
    page = html(reader.get(reverse("core:index")))

    links = [a["href"] for a in page.find_all("a", string="all captures")]
    assert links == [timeline()] * 3


# --- the diff ------------------------------------------------------------------------------------


def test_the_diff_names_the_changed_words_and_the_changed_pixels(reader, three) -> None:
    _first, second, third = three

    response = reader.get(
        reverse("core:url_diff", kwargs={"url": URL, "before": second.pk, "after": third.pk})
    )

    assert response.status_code == 200
    page = html(response)
    assert [e.string for e in page.select(".diff-text del")] == ["forty"]
    assert [e.string for e in page.select(".diff-text ins")] == ["fifty"]
    assert text(page.find(id="text-summary")).startswith("1 word added, 1 word removed.")
    assert text(page.find(id="shot-summary")).startswith(
        "The screenshot changed: 1.00 % of its pixels differ."
    )
    box = page.select_one(".box")["style"]
    assert box == "left: 50.00%; top: 50.00%; width: 10.00%; height: 10.00%;"


def test_the_diff_of_an_unchanged_capture_says_nothing_changed(reader, three) -> None:
    first, second, _third = three

    page = html(
        reader.get(
            reverse("core:url_diff", kwargs={"url": URL, "before": first.pk, "after": second.pk})
        )
    )

    assert text(page.find(id="text-summary")) == ("The readable text is the same in both captures.")
    assert text(page.find(id="shot-summary")) == ("The screenshots are identical, pixel for pixel.")
    assert not page.select(".box")


def test_the_diff_of_captures_without_text_or_screenshot_says_so(reader) -> None:
    bare = capture(T0)
    other = capture(T0 + timedelta(days=1), notice("forty"))

    response = reader.get(
        reverse("core:url_diff", kwargs={"url": URL, "before": bare.pk, "after": other.pk})
    )

    page = html(response)
    assert text(page.find(id="text-problem")).startswith("No readable text in the earlier capture")
    assert text(page.find(id="shot-problem")) == "No screenshot of either capture."


def test_a_diff_of_captures_of_another_url_is_a_404(reader, three) -> None:
    elsewhere = capture(T0, url="https://news.example/other")

    response = reader.get(
        reverse("core:url_diff", kwargs={"url": URL, "before": three[0].pk, "after": elsewhere.pk})
    )

    assert response.status_code == 404


# --- Memento -------------------------------------------------------------------------------------


def varies(response) -> list[str]:
    return [name.strip() for name in response.get("Vary", "").split(",")]


def memento_uri(snapshot) -> str:
    return SERVER + reverse("core:snapshot", args=[snapshot.pk])


def test_the_timemap_lists_the_sealed_captures_in_link_format(reader, three) -> None:
    first, second, third = three
    capture(T0 + timedelta(days=50), status=SnapshotStatus.QUEUED)

    response = reader.get(reverse("core:timemap", kwargs={"url": URL}))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/link-format"
    gate = f"{SERVER}/at/{URL}"
    assert response.content.decode().splitlines() == [
        f'<{SERVER}/timemap/link/{URL}>; rel="self"; type="application/link-format"'
        '; from="Tue, 05 Mar 2024 10:00:00 GMT"; until="Sun, 14 Apr 2024 10:00:00 GMT",',
        f'<{gate}>; rel="timegate",',
        f'<{URL}>; rel="original",',
        f'<{memento_uri(first)}>; rel="memento"; datetime="Tue, 05 Mar 2024 10:00:00 GMT",',
        f'<{memento_uri(second)}>; rel="memento"; datetime="Wed, 06 Mar 2024 10:00:00 GMT",',
        f'<{memento_uri(third)}>; rel="memento"; datetime="Sun, 14 Apr 2024 10:00:00 GMT"',
    ]
    links = parse_header_links(response.content.decode().replace("\n", " "))
    assert [link["rel"] for link in links] == ["self", "timegate", "original", *["memento"] * 3]
    assert links[2]["url"] == URL


def test_the_timemap_of_a_url_never_archived_is_a_404(reader) -> None:
    response = reader.get(reverse("core:timemap", kwargs={"url": "https://news.example/never"}))

    assert response.status_code == 404
    assert "no sealed capture of https://news.example/never" in response.content.decode()


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [("2024", 0), ("20240305", 0), ("20240305220001", 1), ("20240801", 2), ("19990101", 0)],
)
def test_at_a_timestamp_redirects_to_the_nearest_capture(reader, three, timestamp, expected):
    response = reader.get(reverse("core:memento", kwargs={"timestamp": timestamp, "url": URL}))

    assert response.status_code == 302
    assert response["Location"] == memento_uri(three[expected])
    links = parse_header_links(response["Link"])
    assert [(link["url"], link["rel"]) for link in links] == [
        (URL, "original"),
        (f"{SERVER}/at/{URL}", "timegate"),
        (f"{SERVER}/timemap/link/{URL}", "timemap"),
        (memento_uri(three[expected]), "memento"),
    ]
    assert "accept-datetime" not in varies(response)


def test_the_timegate_negotiates_on_accept_datetime(reader, three) -> None:
    gate = reverse("core:timegate", kwargs={"url": URL})

    asked = reader.get(gate, headers={"Accept-Datetime": "Thu, 07 Mar 2024 00:00:00 GMT"})
    latest = reader.get(gate)

    assert asked.status_code == latest.status_code == 302
    assert asked["Location"] == memento_uri(three[1])
    assert "accept-datetime" in varies(asked) and "accept-datetime" in varies(latest)
    assert 'datetime="Wed, 06 Mar 2024 10:00:00 GMT"' in asked["Link"]
    assert latest["Location"] == memento_uri(three[2])


@pytest.mark.parametrize(
    ("path", "headers", "says"),
    [
        ("/at/20241345000000/https://news.example/notice", {}, "not a date and time that exists"),
        ("/at/https://news.example/notice", {"Accept-Datetime": "yesterday"}, "Accept-Datetime"),
        ("/at/2024/ftp://news.example/", {}, "only http and https"),
    ],
)
def test_a_lookup_that_cannot_be_read_is_a_400(reader, three, path, headers, says) -> None:
    response = reader.get(path, headers=headers)

    assert response.status_code == 400
    assert says in response.content.decode()


def test_a_lookup_without_a_sealed_capture_is_a_404(reader) -> None:
    capture(T0, status=SnapshotStatus.FAILED)

    assert reader.get(f"/at/2024/{URL}").status_code == 404
    assert reader.get(f"/at/{URL}").status_code == 404


def test_the_memento_headers_cost_one_query(three) -> None:
    page = memento_headers(lambda request, snapshot_id: HttpResponse("page"))

    with CaptureQueriesContext(connection) as queries:
        response = page(RequestFactory().get("/"), three[0].pk)

    assert response["Memento-Datetime"] == "Tue, 05 Mar 2024 10:00:00 GMT"
    assert len(queries) == 1, [query["sql"] for query in queries]


def test_a_sealed_snapshots_page_is_a_memento(reader, three) -> None:
    response = reader.get(reverse("core:snapshot", args=[three[0].pk]))
    queued = capture(T0, status=SnapshotStatus.QUEUED)
    unsealed = reader.get(reverse("core:snapshot", args=[queued.pk]))

    assert response["Memento-Datetime"] == "Tue, 05 Mar 2024 10:00:00 GMT"
    rels = [link["rel"] for link in parse_header_links(response["Link"])]
    assert rels == ["original", "timegate", "timemap"]
    assert unsealed.status_code == 200 and "Memento-Datetime" not in unsealed


# --- the API -------------------------------------------------------------------------------------


@pytest.fixture
def api() -> Client:
    _token, key = token_create(username=keeper().username)
    return Client(headers={"Authorization": f"Bearer {key}"})


def test_the_api_lists_a_urls_captures_with_digests_and_links(api, three) -> None:
    first, second, third = three

    response = api.get(f"/api/v1/urls/{URL}/captures")

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    newest, middle, oldest = body["items"]
    assert [item["id"] for item in body["items"]] == [str(s.pk) for s in (third, second, first)]
    assert middle == {
        "id": str(second.pk),
        "crawl_id": second.crawl_id,
        "url": URL,
        "timestamp": "20240306100000",
        "captured_at": "2024-03-06T10:00:00Z",
        "status": "sealed",
        "size": len(notice("forty")) + 1000,
        "content_digest": page_text_digest(notice("forty")),
        "unchanged_since": "2024-03-05T10:00:00Z",
        "previous": str(first.pk),
        "links": {
            "snapshot": f"/snapshot/{second.pk}/",
            "api": f"/api/v1/snapshots/{second.pk}",
            "memento": f"/at/20240306100000/{URL}",
            "timeline": f"/url/{URL}",
            "diff": f"/url/{URL}/diff/{first.pk}/{second.pk}/",
        },
    }
    assert (
        newest["unchanged_since"] is None and newest["content_digest"] != middle["content_digest"]
    )
    assert oldest["previous"] is None and oldest["links"]["diff"] is None
    assert api.get(newest["links"]["api"]).json()["id"] == str(third.pk)


def test_the_api_answers_404_for_a_url_never_archived_and_400_for_no_url(api) -> None:
    missing = api.get("/api/v1/urls/https://news.example/never/captures")
    bad = api.get("/api/v1/urls/ftp://news.example/captures")

    assert missing.status_code == 404
    assert missing.json() == {"detail": "no capture of https://news.example/never"}
    assert bad.status_code == 400
    assert "only http and https" in bad.json()["detail"]


# --- manage.py list --url ------------------------------------------------------------------------


def listed(*args: str) -> str:
    out = io.StringIO()
    call_command("list", *args, stdout=out)
    return out.getvalue()


def test_list_url_shows_the_captures_and_what_changed(three) -> None:
    first, second, third = three

    table = listed("--url", "http:/news.example/notice".replace("http:", "https:"))
    rows_json = json.loads(listed("--url", URL, "--json"))
    rows_csv = list(csv.DictReader(io.StringIO(listed("--url", URL, "--csv"))))

    lines = table.splitlines()
    assert lines[0] == URL
    assert [line.split()[0] for line in lines[2:5]] == [
        str(s.pk)[:8] for s in (third, second, first)
    ]
    assert "text changed" in lines[2]
    assert "unchanged since 2024-03-05 10:00:00" in lines[3]
    assert "first capture" in lines[4]
    assert lines[-1] == "3 capture(s), newest first"
    assert [row["id"] for row in rows_json] == [str(s.pk) for s in (third, second, first)]
    assert rows_json[1]["unchanged_since"] == "2024-03-05T10:00:00+00:00"
    assert rows_csv[1]["content_digest"] == page_text_digest(notice("forty"))
    assert rows_csv[0]["timestamp"] == "20240414100000"


def test_list_url_of_a_url_never_archived_says_so(db) -> None:
    assert listed("--url", "https://news.example/never").strip() == (
        "No capture of https://news.example/never."
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ftp://news.example/"], "only http and https"),
        (["--url", URL, "--crawl", "1"], "--url lists every capture of one URL"),
    ],
)
def test_list_url_refuses_bad_input_with_a_message(db, args, message) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("list", *args, stdout=io.StringIO())
