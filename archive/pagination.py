"""The REST API's pagination: ninja's page numbers, bounded so a page number cannot overflow the
database's OFFSET (SQLite's is a signed 64-bit integer)."""

from ninja import Field, Schema
from ninja.pagination import PageNumberPagination

# 50 a page: a million pages is 50 million records, more than one archive lists.
MAX_PAGE = 1_000_000


class BoundedPageNumberPagination(PageNumberPagination):
    """PageNumberPagination whose ``page`` is 1 to MAX_PAGE (a larger one is a 422)."""

    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: int | None = Field(None, ge=1, le=MAX_PAGE)
