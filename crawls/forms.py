"""The add page's form: URLs pasted or a file uploaded, and the crawl's options."""

from __future__ import annotations

from django import forms

from core.services.crawls import (
    MAX_BEHAVIOUR_SECONDS,
    MAX_DEPTH,
    MAX_HOST_DELAY_SECONDS,
    MAX_SCROLL_PAGES,
)
from crawls.choices import CrawlScope
from crawls.inputs import FORMATS
from crawls.models import Persona, Profile

MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # as manage.py add reads at most


class AddForm(forms.Form):
    urls = forms.CharField(
        label="URLs",
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "placeholder": "https://example.com/\n…"}),
        help_text="One or more, in any text; or paste a feed, a bookmarks export or JSON.",
    )
    file = forms.FileField(
        required=False, help_text="A text file, RSS or Atom feed, bookmarks export or JSON list."
    )
    parser = forms.ChoiceField(
        choices=[("auto", "detect"), *[(name, name) for name in FORMATS]], initial="auto"
    )
    depth = forms.IntegerField(min_value=0, max_value=MAX_DEPTH, initial=0)
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    profile = forms.ModelChoiceField(
        queryset=Profile.objects.all(),
        required=False,
        to_field_name="name",
        empty_label="default",
        help_text="Which extractors run (manage.py profile list).",
    )
    persona = forms.ModelChoiceField(
        queryset=Persona.objects.all(),
        required=False,
        to_field_name="name",
        empty_label="none (signed out)",
        help_text="Whose cookies and headers the capture sends (manage.py persona list).",
    )
    behaviour_seconds = forms.FloatField(
        label="Behaviour seconds",
        required=False,
        min_value=0,
        max_value=MAX_BEHAVIOUR_SECONDS,
        help_text="Seconds the browser captures may spend scrolling a page to its bottom, "
        "loading lazy images and waiting for its network before capturing it (never more "
        "than a quarter of the extractor's timeout). 0: none; empty: the server's setting "
        "(BEHAVIOUR_SECONDS).",
    )
    scroll_page_limit = forms.IntegerField(
        label="Scroll pages",
        required=False,
        min_value=0,
        max_value=MAX_SCROLL_PAGES,
        help_text="Times an infinite scroll may load more while a page is scrolled. "
        "Empty: the server's setting (SCROLL_PAGE_LIMIT).",
    )
    only_changes = forms.BooleanField(
        label="Keep only changes",
        required=False,
        help_text="A page that serves the same bytes as its last capture is recorded as a "
        "small capture pointing at that one, not archived again.",
    )
    scope = forms.ChoiceField(
        choices=CrawlScope.choices,
        initial=CrawlScope.HOST,
        required=False,
        help_text="With depth, which links are followed (empty: host).",
    )
    include = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Also follow links matching, one a line: a regular expression, or "
        "surt:org,example)/path (a SURT prefix).",
    )
    exclude = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Never follow links matching (as above); wins over everything.",
    )
    robots = forms.BooleanField(
        label="Obey robots.txt",
        required=False,
        help_text="Disallowed URLs are skipped and listed in the crawl's report.",
    )
    max_pages = forms.IntegerField(
        label="Max pages", required=False, min_value=1, help_text="Empty: no limit."
    )
    max_bytes = forms.IntegerField(
        label="Max bytes",
        required=False,
        min_value=1,
        help_text="Stop following links once the crawl wrote this many bytes. Empty: no limit.",
    )
    host_concurrency = forms.IntegerField(
        label="Host concurrency",
        required=False,
        min_value=1,
        help_text="Fetches of one host at once, at most the server's HOST_CONCURRENCY "
        "(empty: that).",
    )
    host_delay_seconds = forms.FloatField(
        label="Host delay seconds",
        required=False,
        min_value=0,
        max_value=MAX_HOST_DELAY_SECONDS,
        help_text="Seconds between two fetches of one host starting. Empty: none.",
    )

    public = forms.BooleanField(
        required=False,
        help_text="Show its snapshots to everyone, signed in or not, while the archive is "
        "public (PUBLIC_ARCHIVE).",
    )

    def clean(self):
        data = super().clean()
        pasted, upload = data.get("urls", "").strip(), data.get("file")
        if bool(pasted) == bool(upload):
            raise forms.ValidationError("Paste URLs or choose a file (one of them).")
        if upload is not None and upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // 2**20} MiB.")
        return data

    def politeness(self) -> dict:
        """The politeness and scope options of CrawlOptions, from the cleaned form."""
        data = self.cleaned_data
        return {
            "scope": data["scope"] or CrawlScope.HOST,
            "include": data["include"],
            "exclude": data["exclude"],
            "robots": data["robots"],
            "max_pages": data["max_pages"],
            "max_bytes": data["max_bytes"],
            "host_concurrency": data["host_concurrency"],
            "host_delay_seconds": data["host_delay_seconds"] or 0.0,
        }

    def input_data(self) -> tuple[bytes, str]:
        """The input as bytes, and its name for messages and the saved copy."""
        upload = self.cleaned_data.get("file")
        if upload is not None:
            return upload.read(), upload.name
        return self.cleaned_data["urls"].encode(), "pasted text"
