"""The Crawl (one batch of seeds to archive), the Profile its snapshots run, and CrawlSchedule."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTransform
from django.utils import timezone
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from archive.env import is_cron
from core.extractors.behaviours import BehaviourOptions
from core.extractors.credentials import Credentials
from crawls import persona_store
from crawls.choices import CrawlScope, CrawlStatus, SkipReason
from crawls.inputs import left_out_headline
from crawls.profiles import PlannedStep, default_steps, plan_steps
from orchestrator.models import WorkItem, WorkQuerySet
from orchestrator.prepared import UpdateStatement
from orchestrator.wakeups import notify_final

BEHAVIOUR_SECONDS_HELP = (
    "Seconds the rendering extractors may spend on a page before capturing it: scrolling to the "
    "bottom, loading lazy images, waiting for the network (0: none; empty: BEHAVIOUR_SECONDS). "
    "Never more than a quarter of the extractor's timeout."
)
SCROLL_PAGE_LIMIT_HELP = (
    "Times an infinite scroll may grow while a page is scrolled (empty: SCROLL_PAGE_LIMIT)."
)
ONLY_CHANGES_HELP = (
    "Keep only changes: a page that serves the bytes of its last sealed capture is recorded as "
    "a small capture pointing at that one instead of being archived again."
)
PATTERNS_HELP = (
    "matching, one a line: a regular expression searched in the normalized URL, or a SURT "
    "prefix written surt:org,example)/path (crawls/scope.py)."
)
HOST_CONCURRENCY_HELP = (
    "Results of one host this crawl runs at once (empty: HOST_CONCURRENCY); it may lower the "
    "setting, not raise it."
)


class ProfileQuerySet(models.QuerySet):
    def default(self) -> Profile | None:
        """The stored profile marked default, or None (the built-in default applies then)."""
        return self.filter(is_default=True).first()


class Profile(models.Model):
    """A named, ordered list of steps (extractors with their behaviour) a crawl runs.

    ``steps`` is JSON shaped as crawls/profiles.py describes; ``clean()`` checks it. At most one
    profile is the default for crawls that name none; with none marked, every extractor of
    settings.EXTRACTORS runs, nonblocking.
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=300, blank=True)
    steps = models.JSONField(
        default=list,
        help_text=(
            'In run order, e.g. [{"extractor": "wget", "behaviour": "blocking"}, "title", '
            '{"extractor": "readability", "depends_on": ["dom"]}, '
            '{"extractor": "headers", "behaviour": "finally"}]. Behaviours: blocking, '
            "nonblocking (the default), finally."
        ),
    )
    is_default = models.BooleanField(
        default=False, help_text="Used by crawls that name no profile (one profile at most)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    modified_at = models.DateTimeField(auto_now=True)

    objects = ProfileQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=models.Q(is_default=True),
                name="one_default_profile",
                violation_error_message="Another profile is the default already.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Raise ValidationError on ``steps`` when they break a rule of crawls/profiles.py."""
        try:
            plan_steps(self.steps)
        except ValidationError as error:
            raise ValidationError({"steps": error.messages}) from None

    def planned_steps(self) -> list[PlannedStep]:
        """The steps as snapshots run them (raises ValidationError when they became invalid,
        e.g. an extractor that was removed from the registry)."""
        return plan_steps(self.steps)


def steps_of(profile: Profile | None) -> list[PlannedStep]:
    """The steps a crawl with ``profile`` runs: its steps, else (None) the built-in default.
    Raises ValidationError as Profile.planned_steps does."""
    return profile.planned_steps() if profile else default_steps()


class Politeness(models.Model):
    """How a crawl treats the sites it visits and which links it follows (issue 21, item 2):
    the fields a Crawl and a CrawlSchedule share (crawls/scope.py, core/services/scope.py)."""

    scope = models.CharField(
        max_length=8,
        choices=CrawlScope.choices,
        default=CrawlScope.HOST,
        help_text="Which links it follows with depth (any_host widens it to any host).",
    )
    include = models.TextField(blank=True, help_text=f"Also follow links. {PATTERNS_HELP}")
    exclude = models.TextField(blank=True, help_text=f"Never follow links. {PATTERNS_HELP}")
    robots = models.BooleanField(
        default=False, help_text="Obey robots.txt (RFC 9309): disallowed URLs are skipped."
    )
    max_pages = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pages at most (seeds included); empty: no limit."
    )
    max_bytes = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="Stop following links once its results wrote this many bytes.",
    )
    host_concurrency = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=HOST_CONCURRENCY_HELP
    )
    host_delay_seconds = models.FloatField(
        default=0, help_text="Seconds between the starts of two fetches of one host."
    )

    class Meta:
        abstract = True

    def politeness_options(self) -> dict:
        """These fields as CrawlOptions' keyword arguments (core/services/crawls.py)."""
        return {name: getattr(self, name) for name in POLITENESS_FIELDS}


POLITENESS_FIELDS = (
    "scope", "include", "exclude", "robots", "max_pages", "max_bytes", "host_concurrency",
    "host_delay_seconds",
)  # fmt: skip
# Who added a capture may read it back (crawls.add_crawl is what adding needs): the one rule
# of CrawlQuerySet.visible_to and SnapshotQuerySet.visible_to.
ADD_PERMISSION = "crawls.add_crawl"


def visible_filter(user, *, read_perm: str, owner: str, public: str, with_public: bool) -> Q | None:
    """Return the filter that keeps the records ``user`` may read, or None for all of them.

    An active staff user holding ``read_perm`` (``"<app>.<codename>"``, the admin's rule) reads
    every record. Any other active user holding ADD_PERMISSION reads the records whose
    ``owner`` lookup (the crawl's ``created_by``) is that user. With ``with_public``
    (settings.PUBLIC_ARCHIVE) everyone, signed in or not, also reads the records whose
    ``public`` lookup is true. Nobody else reads anything: the filter then matches nothing.
    """
    active = user.is_authenticated and user.is_active
    if active and user.is_staff and user.has_perm(read_perm):
        return None
    allowed = Q(pk__in=[])
    if active and user.has_perm(ADD_PERMISSION):
        allowed |= Q(**{owner: user})
    if with_public:
        allowed |= Q(**{public: True})
    return allowed


class Persona(models.Model):
    """What a site needs to recognise a signed-in user: cookies, extra headers, a user agent.

    Cookies and headers are stored encrypted (crawls/persona_store.py) in ``secrets``; they are
    never shown, exported or recorded. Removing a persona leaves its crawls' snapshots intact.
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=300, blank=True)
    user_agent = models.CharField(
        max_length=512, blank=True, help_text="Sent instead of USER_AGENT (empty: the default)."
    )
    keep_in_warcs = models.BooleanField(
        default=False,
        help_text="Keep the Cookie and Authorization headers sent in the WARCs' request records "
        "(default: they are replaced by '...redacted...').",
    )
    header_domains = models.JSONField(
        default=list,
        blank=True,
        help_text="Hosts and domains (with their subdomains) the extra headers are sent to, "
        'besides those of the cookies: a JSON list, e.g. ["example.com"].',
    )
    secrets = models.TextField(blank=True, editable=False, help_text="Encrypted; never shown.")
    created_at = models.DateTimeField(auto_now_add=True)
    modified_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def credentials(self) -> Credentials:
        """Decrypt the stored cookies and headers; ValueError when the key cannot. The headers
        are for ``header_domains`` and the domains of the cookies (Credentials.for_url)."""
        # No secrets yet: a persona just made (persona_save fills it in the same transaction),
        # or one the admin saved with neither cookies nor headers.
        stored = (
            Credentials.from_json(persona_store.decrypt(self.secrets))
            if self.secrets
            else Credentials()
        )
        return Credentials(
            cookies=stored.cookies,
            headers=stored.headers,
            user_agent=self.user_agent,
            keep_in_warcs=self.keep_in_warcs,
            header_domains=tuple(
                dict.fromkeys(
                    [*self.header_domains, *(c.domain.lstrip(".") for c in stored.cookies)]
                )
            ),
        )

    def set_credentials(self, credentials: Credentials) -> None:
        """Encrypt ``credentials``' cookies and headers into ``secrets`` (the caller saves)."""
        self.secrets = persona_store.encrypt(credentials.to_json())

    def summary(self) -> str:
        """What may be shown of it: counts, never values."""
        try:
            held = self.credentials()
        except ValueError as error:
            return str(error)
        summary = f"{len(held.cookies)} cookies, {len(held.headers)} headers"
        if held.headers:
            summary += f" (for {', '.join(held.header_domains) or 'no site: give a domain'})"
        return summary


class CrawlQuerySet(WorkQuerySet):
    ACTIVE_STATES = CrawlStatus.active()

    def final(self) -> CrawlQuerySet:
        return self.filter(status=CrawlStatus.SEALED)

    def lean(self) -> CrawlQuerySet:
        """These crawls without the fields that grow with them (Crawl.LOADED_ON_DEMAND), read
        when first used: for a crawl loaded once for each of its pages."""
        return self.defer(*Crawl.LOADED_ON_DEMAND)

    def visible_to(self, user, *, with_public: bool = False) -> CrawlQuerySet:
        """The crawls ``user`` may read (visible_filter): all for staff holding
        ``crawls.view_crawl``, else the user's own, and the public ones ``with_public``."""
        allowed = visible_filter(
            user,
            read_perm="crawls.view_crawl",
            owner="created_by",
            public="public",
            with_public=with_public,
        )
        return self if allowed is None else self.filter(allowed)


def crawl_add_bytes(crawl_id: int, change: int) -> int:
    """Add ``change`` bytes (negative for outputs sent back or moved aside) to crawl
    ``crawl_id``'s ``bytes_written`` in one UPDATE (no read first, so two actors recording at
    once both count), compiled once per process (orchestrator/prepared.py); return how many
    crawls changed (0 or 1)."""
    if not change:
        return 0
    return BYTES_ADDED.run(crawl_id, change)


def _bytes_added(crawl_id: int, change: int) -> tuple[models.QuerySet, dict]:
    """The rows and values of ``crawl_add_bytes``'s UPDATE."""
    return Crawl.objects.filter(pk=crawl_id), {"bytes_written": models.F("bytes_written") + change}


BYTES_ADDED = UpdateStatement(
    "bytes a crawl wrote", _bytes_added, (int, int), actors=("snapshot", "archiveresult")
)


class Crawl(ConcurrentTransitionMixin, WorkItem, Politeness):
    """One batch: the seed URLs a person gave at once, how deep to follow links, and its state.

    ``queued → started`` parses the seeds into root Snapshots; ``started → sealed`` once every
    Snapshot of it is final; ``held`` pauses it (nothing of a held crawl is claimed).
    """

    # Fields that grow with the crawl (a bookmarks export of 1,000 seeds with titles: 200 kB),
    # left out when a snapshot or result is claimed with its crawl and read when first used
    # (orchestrator/prepared.py ``with_related``).
    LOADED_ON_DEMAND = ("seeds", "seed_details")

    status = FSMField(
        default=CrawlStatus.QUEUED, choices=CrawlStatus.choices, protected=True, db_index=True
    )
    seeds = models.TextField(help_text="Normalized seed URLs, one per line.")
    depth = models.PositiveSmallIntegerField(
        default=0, help_text="How many links deep to follow from each seed (0: the seeds only)."
    )
    any_host = models.BooleanField(
        default=False, help_text="Follow links to other hosts too (default: same host only)."
    )
    tags = models.ManyToManyField("core.Tag", blank=True, related_name="crawls")
    profile = models.ForeignKey(
        Profile,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="crawls",
        help_text="The steps its snapshots run; none: every extractor of settings.EXTRACTORS.",
    )
    persona = models.ForeignKey(
        Persona,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="crawls",
        help_text="Who the crawl signs in as: its cookies, headers and user agent.",
    )
    schedule = models.ForeignKey(
        "crawls.CrawlSchedule",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="crawls",
        help_text="The schedule that made this crawl, if one did.",
    )
    source_file = models.CharField(
        max_length=512, blank=True, help_text="The input as received, relative to DATA_DIR."
    )
    seed_details = models.JSONField(
        default=dict,
        blank=True,
        help_text="Title and tags the input gave a seed: {url: {'title': ..., 'tags': [...]}}.",
    )
    notify_webhook = models.URLField(
        max_length=2048, blank=True, help_text="Gets the report as JSON when the crawl seals."
    )
    notify_email = models.CharField(
        max_length=512, blank=True, help_text="Addresses (comma-separated) the report is sent to."
    )
    behaviour_seconds = models.FloatField(null=True, blank=True, help_text=BEHAVIOUR_SECONDS_HELP)
    scroll_page_limit = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=SCROLL_PAGE_LIMIT_HELP
    )
    only_changes = models.BooleanField(default=False, help_text=ONLY_CHANGES_HELP)
    stop_reason = models.CharField(
        max_length=300, blank=True, help_text="Why it stopped growing before its links ran out."
    )
    bytes_written = models.BigIntegerField(
        default=0,
        editable=False,
        help_text="Bytes its results' outputs hold (their output_size summed), kept as each is "
        "recorded, sent back or moved aside; max-bytes is checked against it.",
    )
    input_report = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the input was read: its format, entries accepted, and those left out.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        help_text="Who added it: a user who is not staff reads only the crawls they added "
        "and their snapshots.",
    )
    public = models.BooleanField(
        default=False,
        help_text="Shown to everyone, signed in or not, while PUBLIC_ARCHIVE is on.",
    )
    report = models.JSONField(
        default=dict, blank=True, help_text="Written on sealing: counts per state and failures."
    )
    hold_reason = models.CharField(max_length=300, blank=True, help_text="Why it is held.")
    estimate = models.JSONField(
        default=dict,
        blank=True,
        help_text="Seed sizes by HEAD before it started (crawls/estimate.py), when asked for.",
    )

    objects = CrawlQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        first = self.seeds.split("\n", 1)[0]
        more = self.seed_list()[1:]
        return f"Crawl {self.pk}: {first}" + (f" (+{len(more)} more)" if more else "")

    def save(self, *args, **kwargs) -> None:
        """Save; a crawl already stored leaves ``bytes_written`` alone, which only
        ``crawl_add_bytes`` changes: a row read before a result was recorded must not
        write its older count back. Fields not loaded (``LOADED_ON_DEMAND``) are left alone
        too, as Django leaves them when it picks the fields itself."""
        if not self._state.adding and kwargs.get("update_fields") is None and not args:
            not_loaded = self.get_deferred_fields()
            kwargs["update_fields"] = [
                field.name
                for field in self._meta.concrete_fields
                if not field.primary_key
                and field.name != "bytes_written"
                and field.attname not in not_loaded
            ]
        super().save(*args, **kwargs)

    def refresh_from_db(self, using=None, fields=None, from_queryset=None) -> None:
        """Read ``fields`` (all, if None) again from the database.

        A field left out (LOADED_ON_DEMAND) and read on first use is read alone. Django's
        refresh, as django-fsm runs it, would set the state too: a transition not saved yet
        would be undone in this object, and its save would write the state it was read in.
        """
        fields = None if fields is None else list(fields)
        if fields and set(fields) <= set(self.LOADED_ON_DEMAND):
            # The queryset as Django's refresh picks it.
            if from_queryset is None:
                rows = type(self)._base_manager.db_manager(using, hints={"instance": self})
            else:
                rows = from_queryset if using is None else from_queryset.using(using)
            for name, value in rows.filter(pk=self.pk).values(*fields).get().items():
                setattr(self, name, value)
            return
        super().refresh_from_db(using, fields, from_queryset)

    def lock_and_refresh(self, *fields: str) -> None:
        """Lock this crawl's row until the caller's transaction ends (``SELECT ... FOR
        UPDATE``; on SQLite the transaction holds the write lock already) and read ``fields``
        again, in the same query: what a result recorded or an operator changed since this
        object was read."""
        self.refresh_from_db(fields=list(fields), from_queryset=Crawl.objects.select_for_update())

    def announce(self) -> None:
        """A held crawl wakes the orchestrator as a final one does: ``add --wait`` stops waiting
        for it at once (orchestrator/wakeups.py)."""
        if self.status == CrawlStatus.HELD:
            notify_final(self._meta.model_name)
        else:
            super().announce()

    def planned_steps(self) -> list[PlannedStep]:
        """The steps each snapshot of this crawl runs: its profile's, else the built-in default
        (read when a snapshot starts, so an edited profile applies to snapshots not yet started).
        """
        return steps_of(self.profile)

    @property
    def input_left_out(self) -> str:
        """What the reading of its input left out, in words ("" when nothing was)."""
        return left_out_headline(self.input_report or {})

    def seed_list(self) -> list[str]:
        """Return the seed URLs in the order they were given."""
        return [line for line in self.seeds.splitlines() if line]

    def seed_given(self, url: str) -> dict | None:
        """Return what the crawl's input gave seed ``url`` (``{"title": str, "tags": [str]}``),
        or None. While ``seed_details`` is not loaded (LOADED_ON_DEMAND) the database reads
        that one entry of it, rather than the whole object being loaded and decoded here."""
        # SQLite's JSON path takes a quoted key without escapes: a key holding a quote or a
        # backslash is read the long way (a seed never does: crawls/seeds.py escapes both).
        addressable = not any(character in url for character in '"\\')
        if "seed_details" not in self.get_deferred_fields() or not addressable:
            return self.seed_details.get(url)
        # Finalizing asks twice for its page (the title, then index.json): one read.
        read = self.__dict__.setdefault("_seeds_given", {})
        if url not in read:
            entry = KeyTransform(url, "seed_details")
            rows = Crawl.objects.filter(pk=self.pk).annotate(given=entry)
            read[url] = rows.values_list("given", flat=True).first()
        return read[url]

    def behaviour_summary(self) -> str:
        """Say what the rendering extractors do to this crawl's pages before capturing them,
        for people: "at most 30 s, 5 scroll pages", or "off"; a value that comes from the
        settings (the crawl set none) is followed by the setting's name."""
        options = BehaviourOptions(self.behaviour_seconds, self.scroll_page_limit)
        if options.resolved_seconds() == 0:
            return "off" if self.behaviour_seconds is not None else "off (BEHAVIOUR_SECONDS)"
        seconds = f"{options.resolved_seconds():g} s"
        if self.behaviour_seconds is None:
            seconds += " (BEHAVIOUR_SECONDS)"
        pages = f"{options.resolved_page_limit()} scroll pages"
        if self.scroll_page_limit is None:
            pages += " (SCROLL_PAGE_LIMIT)"
        return f"at most {seconds}, {pages}"

    # --- guards (pure) ------------------------------------------------------------------------

    def all_snapshots_final(self) -> bool:
        """True when every Snapshot of this crawl is sealed or failed."""
        return not self.snapshots.active().exists()

    # --- transitions ----------------------------------------------------------------------------

    @transition(field=status, source=CrawlStatus.QUEUED, target=CrawlStatus.STARTED)
    def start(self) -> None:
        """Begin the crawl; the caller creates its root Snapshots in the same transaction."""
        self.start_ts = self.start_ts or timezone.now()

    @transition(
        field=status,
        source=CrawlStatus.STARTED,
        target=CrawlStatus.SEALED,
        conditions=[all_snapshots_final],
    )
    def seal(self, *, report: dict) -> None:
        """Close the crawl with its report; nothing is due for it any more."""
        self.report = report
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=CrawlStatus.SEALED, target=CrawlStatus.STARTED)
    def reopen(self) -> None:
        """A snapshot of this sealed crawl is archived again: seal it anew once that is done."""
        self.end_ts = None
        self.retry_at = timezone.now()

    @transition(field=status, source=CrawlStatus.STARTED, target=CrawlStatus.STARTED)
    def stop_growing(self, *, reason: str) -> None:
        """A limit was reached (``max_pages``, ``max_bytes``): queue no more of its URLs; the
        snapshots it has run on, and it seals with ``reason`` in its report."""
        self.stop_reason = reason[:300]

    @transition(field=status, source=CrawlStatus.active(), target=CrawlStatus.HELD)
    def hold(self, *, reason: str = "") -> None:
        """Pause the crawl: none of its records are claimed until it is released. ``reason``
        says why (shown by the admin and ``status``)."""
        self.hold_reason = reason[:300]

    @transition(field=status, source=CrawlStatus.HELD, target=CrawlStatus.HELD)
    def explain_hold(self, *, reason: str) -> None:
        """Say why a held crawl stays held (e.g. its estimate would not fit on the disk)."""
        self.hold_reason = reason[:300]

    @transition(field=status, source=CrawlStatus.HELD, target=CrawlStatus.QUEUED)
    def release(self) -> None:
        """Resume a held crawl where it stopped (starting again is idempotent)."""
        self.hold_reason = ""
        self.retry_at = timezone.now()


class CrawlSkip(models.Model):
    """One URL a crawl met (a seed or a link) and did not archive, with the reason: out of
    scope, excluded, disallowed by robots.txt, or past a limit of the crawl."""

    crawl = models.ForeignKey(Crawl, on_delete=models.CASCADE, related_name="skips")
    url = models.CharField(max_length=2048)
    reason = models.CharField(max_length=16, choices=SkipReason.choices)
    detail = models.CharField(max_length=300, blank=True, help_text="The rule or limit, in words.")
    found_on = models.CharField(
        max_length=2048,
        blank=True,
        help_text="The URL of the crawl's page the link was on (its snapshot's index.json lists "
        "it); empty for a seed.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["crawl", "url"]
        constraints = [
            models.UniqueConstraint(fields=["crawl", "url"], name="one_skip_per_crawl_url")
        ]

    def __str__(self) -> str:
        return f"{self.url}: {self.reason}"


def cron_next(expression: str, after) -> datetime:
    """The first time strictly after ``after`` (an aware datetime) that the 5-field cron
    ``expression`` names, read in settings.TIME_ZONE (croniter's rules). Raises ValueError for an
    invalid expression."""
    from croniter import croniter  # on first use, as archive/env.py's is_cron says why

    if not is_cron(expression):
        raise ValueError(
            f"invalid cron expression {expression!r}: five fields, minute hour day-of-month "
            "month day-of-week, e.g. '0 * * * *' (hourly) or '30 2 * * 1' (Mondays at 02:30)"
        )
    return croniter(expression, timezone.localtime(after)).get_next(datetime)


class SaveDefaults(models.Model):
    """What a user's one-click saves run with (``/save/<url>``, the bookmarklet, ``POST
    /api/v1/save``: core/services/saves.py): a profile and a persona. Without a row, or with
    either left empty, a save runs as ``manage.py add`` without options does."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="save_defaults"
    )
    profile = models.ForeignKey(
        Profile,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        help_text="Empty: the default profile.",
    )
    persona = models.ForeignKey(
        Persona,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        help_text="Empty: signed out.",
    )

    class Meta:
        verbose_name = "save defaults"
        verbose_name_plural = "save defaults"

    def __str__(self) -> str:
        return f"Save defaults of {self.user}"

    def options(self) -> dict:
        """The profile and persona as CrawlOptions' keyword arguments ("": none)."""
        return {
            "profile": self.profile.name if self.profile else "",
            "persona": self.persona.name if self.persona else "",
        }


class CrawlScheduleQuerySet(models.QuerySet):
    def due(self, now=None) -> CrawlScheduleQuerySet:
        """Enabled schedules whose next run is at or before ``now``."""
        return self.filter(enabled=True, next_run_at__lte=now or timezone.now())


class CrawlSchedule(Politeness):
    """Seeds re-crawled on a cron schedule: each run is a new Crawl of the same input, with the
    same options (core/services/schedules.py).

    ``next_run_at`` is worked out from the time of the last run, not from the run it replaces:
    runs missed while Vellum was down are made up once, not once each.
    """

    cron = models.CharField(max_length=100, help_text="Five fields, e.g. '0 * * * *' (hourly).")
    enabled = models.BooleanField(default=True)
    source = models.TextField(
        help_text="The input each run reads: URLs, a feed, a bookmarks export or JSON."
    )
    parser = models.CharField(max_length=16, default="auto", help_text="The input's format.")
    depth = models.PositiveSmallIntegerField(default=0)
    any_host = models.BooleanField(default=False)
    tags = models.CharField(max_length=1000, blank=True, help_text="Comma-separated.")
    priority = models.SmallIntegerField(default=0)
    profile = models.ForeignKey(
        Profile, null=True, blank=True, on_delete=models.PROTECT, related_name="schedules"
    )
    persona = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="schedules"
    )
    notify_webhook = models.URLField(max_length=2048, blank=True)
    notify_email = models.CharField(max_length=512, blank=True)
    behaviour_seconds = models.FloatField(null=True, blank=True, help_text=BEHAVIOUR_SECONDS_HELP)
    scroll_page_limit = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=SCROLL_PAGE_LIMIT_HELP
    )
    only_changes = models.BooleanField(default=False, help_text=ONLY_CHANGES_HELP)
    next_run_at = models.DateTimeField(db_index=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, help_text="Why the last run made no crawl.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = CrawlScheduleQuerySet.as_manager()

    class Meta:
        ordering = ["next_run_at", "pk"]

    def __str__(self) -> str:
        first = self.source.strip().split("\n", 1)[0][:80]
        return f"Schedule {self.pk} ({self.cron}): {first}"

    def clean(self) -> None:
        """Raise ValidationError on ``cron`` when croniter cannot read it."""
        try:
            cron_next(self.cron, timezone.now())
        except ValueError as error:
            raise ValidationError({"cron": str(error)}) from None
