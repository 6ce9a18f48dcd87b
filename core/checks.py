"""System checks on Vellum's settings that need the app registry (run by every command)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning, register

# What each extractor's entry in EXTRACTOR_OPTIONS may set, and the smallest value allowed.
EXTRACTOR_OPTION_MINIMUMS = {"timeout": 1, "max_attempts": 1}


@register()
def check_extractor_options(app_configs, **kwargs) -> list[Error]:
    """Report unknown extractor names, unknown keys and values that are not positive integers
    in settings.EXTRACTOR_OPTIONS."""
    from core.extractors.registry import BY_NAME

    errors = []
    for name, options in settings.EXTRACTOR_OPTIONS.items():
        if name not in BY_NAME:
            known = ", ".join(BY_NAME)
            errors.append(
                Error(
                    f"EXTRACTOR_OPTIONS names an unknown extractor {name!r} ({known})",
                    id="core.E001",
                )
            )
            continue
        if not isinstance(options, dict):
            errors.append(Error(f"EXTRACTOR_OPTIONS[{name!r}] must be an object", id="core.E002"))
            continue
        for key, value in options.items():
            minimum = EXTRACTOR_OPTION_MINIMUMS.get(key)
            if minimum is None:
                allowed = ", ".join(EXTRACTOR_OPTION_MINIMUMS)
                errors.append(
                    Error(
                        f"EXTRACTOR_OPTIONS[{name!r}] has an unknown key {key!r} "
                        f"(allowed: {allowed})",
                        id="core.E003",
                    )
                )
            elif isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                errors.append(
                    Error(
                        f"EXTRACTOR_OPTIONS[{name!r}][{key!r}] must be an integer "
                        f"of at least {minimum}, not {value!r}",
                        id="core.E004",
                    )
                )
    return errors


@register()
def check_tool_confinement(app_configs, **kwargs) -> list[Warning]:
    """Warn when util-linux's setpriv or prlimit is missing: extractor tools then run without
    dying with their actor, or without the kernel's per-file size bound."""
    from core.extractors import process

    missing = [name for name, path in (("setpriv", process.SETPRIV), ("prlimit", process.PRLIMIT))
               if path is None]  # fmt: skip
    if not missing:
        return []
    return [
        Warning(
            f"{' and '.join(missing)} not found (util-linux): extractor tools run without "
            "dying with their actor or without the per-file MAX_DOWNLOAD_BYTES bound",
            hint="Install util-linux (bash .ci/install does).",
            id="core.W001",
        )
    ]
