"""The admin's "remove with files" action for snapshots and crawls: a confirmation page first,
then core/services/removal.py for each selected record, refusals reported one by one."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.template.response import TemplateResponse

from core.services.removal import RemovalRefused

CONFIRM_TEMPLATE = "admin/vellum/confirm_remove.html"
SHOWN_REFUSALS = 10


def remove_with_files(model_admin, request, queryset, remove) -> TemplateResponse | None:
    """Ask first; once confirmed, call ``remove(pk)`` (a removal service deleting files) for
    every selected record and say how many went and why the others stayed."""
    if request.POST.get("confirmed") != "yes":
        context = {
            **model_admin.admin_site.each_context(request),
            "title": "Remove and delete folders?",
            "opts": model_admin.model._meta,
            "items": list(queryset),
            "action": request.POST.get("action", ""),
            "archive_dir": settings.ARCHIVE_DIR,
        }
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)
    removed, refused = 0, []
    for pk in queryset.values_list("pk", flat=True):
        try:
            remove(pk)
            removed += 1
        except (RemovalRefused, model_admin.model.DoesNotExist) as error:
            refused.append(str(error) or f"{pk}: gone already")
    meta = model_admin.model._meta
    noun = meta.verbose_name if removed == 1 else meta.verbose_name_plural
    if removed:
        model_admin.message_user(request, f"{removed} {noun} removed, with the folders.")
    for reason in refused[:SHOWN_REFUSALS]:
        model_admin.message_user(request, f"Kept: {reason}", level=messages.WARNING)
    if len(refused) > SHOWN_REFUSALS:
        more = len(refused) - SHOWN_REFUSALS
        model_admin.message_user(request, f"... and {more} more kept.", level=messages.WARNING)
    return None
