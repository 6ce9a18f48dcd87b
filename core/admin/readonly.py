"""The admin's read-only records: rows that crawls create and transitions change, which nobody
types in, edits or deletes by hand."""

from __future__ import annotations


class ReadOnlyAdminMixin:
    """Records are created by crawls and changed by transitions, not typed in by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Deleting rows would orphan their folders in DATA_DIR; "delete with files" is an action
        # of its own (see the closing note of issue 2).
        return False
