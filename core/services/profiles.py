"""Workflows over profiles: save and remove the named lists of steps that crawls run."""

from __future__ import annotations

from django.db import transaction

from crawls.choices import StepBehaviour
from crawls.models import Profile
from crawls.profiles import PlannedStep


def profile_save(
    *, name: str, steps: list, description: str = "", is_default: bool = False
) -> Profile:
    """Create the profile ``name``, or replace its steps; with ``is_default`` it becomes the
    default (the earlier default no longer is). Return it.

    Raises ValidationError (nothing saved) for an invalid name or steps (crawls/profiles.py).
    """
    with transaction.atomic():
        profile = Profile.objects.select_for_update().filter(name=name).first() or Profile(
            name=name
        )
        profile.steps = steps
        profile.description = description or profile.description
        profile.is_default = is_default or profile.is_default
        if profile.is_default:
            Profile.objects.filter(is_default=True).exclude(name=name).update(is_default=False)
        profile.full_clean()
        profile.save()
    return profile


def profile_remove(*, name: str) -> None:
    """Delete the profile ``name``. Raises Profile.DoesNotExist, or ProtectedError while a
    crawl names it (its record says which steps that crawl ran)."""
    Profile.objects.get(name=name).delete()


def describe_steps(steps: list[PlannedStep]) -> str:
    """One line for people: ``wget [blocking] → title → readability (after dom)``."""
    parts = []
    for step in steps:
        text = step.extractor
        if step.behaviour != StepBehaviour.NONBLOCKING:
            text += f" [{step.behaviour}]"
        if step.depends_on:
            text += f" (after {', '.join(step.depends_on)})"
        parts.append(text)
    return " → ".join(parts)
