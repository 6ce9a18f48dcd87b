"""The archive's payload index: which WARC records hold a payload in full, and which ones are
``revisit`` records standing for a payload held elsewhere (issue 20, "unchanged bytes stored
once"; core/services/dedup.py writes both).

A payload is the entity body of an HTTP response record (ISO 28500 §6.3), as stored. Two
records hold the same payload when their payloads' SHA-256 are equal; the WARC-Payload-Digest a
tool wrote (SHA-1 for wget) is kept to be written in revisit records, never trusted alone.
"""

from __future__ import annotations

from django.db import models

from core.choices import SnapshotStatus


class PayloadRecordQuerySet(models.QuerySet):
    def usable(self) -> PayloadRecordQuerySet:
        """Records of sealed snapshots: the ones a new revisit record may refer to (a snapshot
        being archived again, or finalized, may still move or rewrite its WARCs)."""
        return self.filter(snapshot__status=SnapshotStatus.SEALED)

    def of_payload(self, sha256: str) -> PayloadRecordQuerySet:
        return self.filter(payload_sha256=sha256)


class PayloadRecord(models.Model):
    """One ``response`` record of a snapshot's WARC that holds its payload in full: an original
    that revisit records elsewhere may refer to.

    ``warc`` is the WARC's path relative to the snapshot folder (``wget/warc/archive.warc.gz``,
    or ``history/<run>/...`` after a re-archive moved it); the record is found in it by its
    WARC-Record-ID, so rewriting the file never leaves a stale offset here.
    """

    snapshot = models.ForeignKey(
        "core.Snapshot", on_delete=models.CASCADE, related_name="payload_records"
    )
    warc = models.CharField(max_length=1024, help_text="The WARC, relative to the snapshot folder.")
    record_id = models.CharField(
        max_length=128, db_index=True, help_text="Its WARC-Record-ID, <urn:uuid:…>."
    )
    target_uri = models.TextField(help_text="Its WARC-Target-URI.")
    warc_date = models.CharField(max_length=40, help_text="Its WARC-Date, as written.")
    payload_digest = models.CharField(
        max_length=140, help_text="Its WARC-Payload-Digest, as written (sha1:… for wget)."
    )
    payload_sha256 = models.CharField(max_length=64, db_index=True)
    payload_length = models.BigIntegerField(help_text="Bytes of payload, as stored.")

    objects = PayloadRecordQuerySet.as_manager()

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot", "record_id"], name="unique_payload_record_per_snapshot"
            )
        ]

    def __str__(self) -> str:
        return f"{self.target_uri} ({self.payload_length} bytes) in {self.snapshot_id}"


class PayloadRevisit(models.Model):
    """One ``revisit`` record (identical-payload-digest profile, WARC/1.1 §6.7.2) that Vellum
    wrote in a snapshot's WARC in place of a response whose payload ``original`` holds.

    The original cannot be deleted while this row exists (RESTRICT): removing its snapshot
    first makes this record whole again, or points it at another copy
    (core/services/dedup.py).
    """

    snapshot = models.ForeignKey(
        "core.Snapshot", on_delete=models.CASCADE, related_name="payload_revisits"
    )
    warc = models.CharField(max_length=1024, help_text="The WARC, relative to the snapshot folder.")
    record_id = models.CharField(max_length=128, help_text="The revisit's WARC-Record-ID.")
    original = models.ForeignKey(PayloadRecord, on_delete=models.RESTRICT, related_name="revisits")

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot", "record_id"], name="unique_payload_revisit_per_snapshot"
            )
        ]

    def __str__(self) -> str:
        return f"revisit {self.record_id} in {self.snapshot_id}"
