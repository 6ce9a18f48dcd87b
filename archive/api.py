"""The REST API under ``/api/v1/`` (django-ninja): authentication, errors as JSON, and the
routers of each app (crawls/api.py, core/api.py, orchestrator/api.py).

Every endpoint needs a signed-in user: a bearer token (``Authorization: Bearer vlm_...``, made
with ``manage.py token create``) or the admin's session (with its CSRF token for changes). The
OpenAPI schema is at ``/api/v1/openapi.json``, browsable at ``/api/v1/docs``. Errors are JSON,
``{"detail": "what is wrong"}``: 400 for bad input, 401 without credentials, 404 for an unknown
id, 409 for a change the record's state does not allow, 422 for a body of the wrong shape,
429 (with ``Retry-After``, seconds) past ``settings.API_RATE`` calls per user.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django_fsm import ConcurrentTransition, TransitionNotAllowed
from ninja import NinjaAPI
from ninja.security import HttpBearer, SessionAuth
from ninja.throttling import UserRateThrottle

from core.api import router as snapshots_router
from core.removal import RemovalRefused
from core.tokens import token_user
from crawls.api import router as crawls_router
from crawls.seeds import InputError
from orchestrator.api import router as status_router


class BearerToken(HttpBearer):
    """``Authorization: Bearer <token>``: the token's user (core/tokens.py)."""

    def authenticate(self, request, token: str):
        user = token_user(token)
        if user is not None:
            request.user = user
        return user


# Each user's calls, counted in Django's cache: per process with the default local-memory cache.
API_THROTTLE = UserRateThrottle(settings.API_RATE)

api = NinjaAPI(
    title="Vellum API",
    version="1",
    description="Add URLs, follow crawls, snapshots and archive results, hold, release, retry.",
    auth=[BearerToken(), SessionAuth()],
    urls_namespace="api",
    throttle=[API_THROTTLE],
)
api.add_router("/crawls", crawls_router, tags=["crawls"])
api.add_router("/", snapshots_router, tags=["snapshots"])
api.add_router("/", status_router, tags=["status"])


def _error(request, status: int, detail: str):
    return api.create_response(request, {"detail": detail}, status=status)


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
