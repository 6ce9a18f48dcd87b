"""The REST API under ``/api/v1/`` (django-ninja): authentication, errors as JSON, and the
routers of each app (crawls/api.py, core/api.py, orchestrator/api.py).

Every endpoint needs an active staff user (or, where it says ``own=True``, a user holding
``crawls.add_crawl``, who reads only their own crawls and snapshots), by a bearer token
(``Authorization: Bearer vlm_...``, made with ``manage.py token create``; it acts as its user) or
the admin's session (with its CSRF token for changes), who holds the model permission the operation
names with ``auth=staff(...)``, as the admin's matching action needs it (core/web/permissions.py).
The OpenAPI schema is at ``/api/v1/openapi.json``, browsable at ``/api/v1/docs``. Errors are JSON,
``{"detail": "what is wrong"}``: 400 for bad input, 401 without credentials, 403 for a user who is
not staff or lacks the permission, 404 for an unknown id, 409 for a change the record's state does
not allow, 422 for a body of the wrong shape, 429 (with ``Retry-After``, seconds) past
``settings.API_RATE`` calls per user.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django_fsm import ConcurrentTransition, TransitionNotAllowed
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.openapi.docs import Swagger
from ninja.parser import Parser
from ninja.throttling import UserRateThrottle

from core.api import router as snapshots_router
from core.services.removal import RemovalRefused
from core.web.permissions import ANY_STAFF
from crawls.api import router as crawls_router
from crawls.api import save_router
from crawls.seeds import InputError
from orchestrator.api import router as status_router

# Each user's calls, counted in Django's cache: per process with the default local-memory cache.
API_THROTTLE = UserRateThrottle(settings.API_RATE)


class BodyRefused(ValueError):
    """A request body this API does not read; the message says why, in one line."""


class JsonObjectParser(Parser):
    """Every request body of this API is a JSON object (RFC 8259, section 4), or ``null`` for
    none: any other JSON (an array, a number) is refused with 400 instead of being read as no
    body at all. JSON nested deeper than Python's recursion limit (some 1,000 levels) is
    refused with 400 too, instead of crashing the decoder."""

    def parse_body(self, request):
        try:
            data = super().parse_body(request)
        except RecursionError:
            raise BodyRefused("the request body is nested too deeply") from None
        if data is not None and not isinstance(data, dict):
            raise BodyRefused("the request body must be a JSON object")
        return data


# The errors every operation may answer, as ``{"detail": ...}`` (a list of field errors for
# 422), documented in the OpenAPI schema so that clients and schemathesis know them.
ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "detail": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}],
            "description": "What is wrong; for 422, one object per invalid field.",
        }
    },
    "required": ["detail"],
}
ERRORS = {
    "400": "Bad input, or a request body that is not a JSON object",
    "401": "No valid token or session",
    "403": "The user is not staff, or lacks the model permission the operation needs",
    "404": "No record with that id",
    "409": "Not allowed in the record's current state",
    "422": "Parameters or body of the wrong shape",
    "429": "Past API_RATE calls; Retry-After says how many seconds to wait",
}


class VellumAPI(NinjaAPI):
    """NinjaAPI whose OpenAPI schema also documents the errors (ERRORS) of every operation."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        for operations in schema["paths"].values():
            for operation in operations.values():
                for status, description in ERRORS.items():
                    operation["responses"].setdefault(
                        status, {"description": description, "content": error}
                    )
        return schema


class LocalSwagger(Swagger):
    """The docs page from django-ninja's own template and Swagger UI files (``/static/ninja/``),
    never a CDN's. django-ninja renders ``template`` only when "ninja" is an installed app, which
    it is not here (settings.NINJA_DIR says why), and otherwise the file at ``template_cdn``: so
    that names its local template."""

    template_cdn = str(settings.NINJA_DIR / "templates" / Swagger.template)


api = VellumAPI(
    title="Vellum API",
    version="1",
    description="Add URLs, follow crawls, snapshots and archive results, hold, release, retry.",
    auth=ANY_STAFF,  # operations narrow it to their permission with auth=staff(...)
    urls_namespace="api",
    throttle=[API_THROTTLE],
    parser=JsonObjectParser(),
    docs=LocalSwagger(),
)
api.add_router("/crawls", crawls_router, tags=["crawls"])
api.add_router("/", save_router, tags=["crawls"])
api.add_router("/", snapshots_router, tags=["snapshots"])
api.add_router("/", status_router, tags=["status"])


def _error(request, status: int, detail: str):
    return api.create_response(request, {"detail": detail}, status=status)


@api.exception_handler(HttpError)
def http_error(request, error: HttpError):
    """ninja's own errors; a body it could not parse says why when the parser said it."""
    cause = error.__cause__
    detail = str(cause) if isinstance(cause, BodyRefused) else str(error)
    return _error(request, error.status_code, detail)


@api.exception_handler(InputError)
def bad_input(request, error: InputError):
    return _error(request, 400, str(error))


@api.exception_handler(ValidationError)
def invalid(request, error: ValidationError):
    return _error(request, 400, "; ".join(error.messages))


@api.exception_handler(ObjectDoesNotExist)
def not_found(request, error: ObjectDoesNotExist):
    return _error(request, 404, str(error) or "not found")


@api.exception_handler(TransitionNotAllowed)
def not_allowed(request, error: TransitionNotAllowed):
    return _error(request, 409, f"not allowed in its current state: {error}")


@api.exception_handler(ConcurrentTransition)
def changed_meanwhile(request, error: ConcurrentTransition):
    return _error(request, 409, f"it changed meanwhile; try again ({error})")


@api.exception_handler(RemovalRefused)
def removal_refused(request, error: RemovalRefused):
    return _error(request, 409, str(error))
