"""The admin, as a package: Django's autodiscovery imports ``core.admin``, which registers the
ModelAdmins of each module here."""

from core.admin import (  # noqa: F401  (registers the ModelAdmins)
    hosts,
    preservation,
    results,
    snapshots,
    tokens,
)
