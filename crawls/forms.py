"""The add page's form: URLs pasted or a file uploaded, and the crawl's options."""

from __future__ import annotations

from django import forms

from core.services.crawls import MAX_BEHAVIOUR_SECONDS, MAX_DEPTH, MAX_SCROLL_PAGES
from crawls.inputs import FORMATS
from crawls.models import Profile

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

    def clean(self):
        data = super().clean()
        pasted, upload = data.get("urls", "").strip(), data.get("file")
        if bool(pasted) == bool(upload):
            raise forms.ValidationError("Paste URLs or choose a file (one of them).")
        if upload is not None and upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // 2**20} MiB.")
        return data

    def input_data(self) -> tuple[bytes, str]:
        """The input as bytes, and its name for messages and the saved copy."""
        upload = self.cleaned_data.get("file")
        if upload is not None:
            return upload.read(), upload.name
        return self.cleaned_data["urls"].encode(), "add page"
