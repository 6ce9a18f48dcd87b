"""Transition buttons on the admin's read-only change pages, with django-fsm-2's admin
integration (django_fsm.admin.FSMAdminMixin), each routed through the service that owns it.

FSMAdminMixin offers the transitions a record's state allows, as buttons (and a form when a
transition takes arguments), and would call the model's transition method and ``save()`` the
record itself. Vellum's transitions are only ever made by its services, which take the locks,
reopen a sealed crawl, move earlier runs aside and retry a transition an actor raced: so
``fsm_services`` names, per transition, the service call that makes it, and only those
transitions get a button. Our change pages are read-only (no change permission), so a button's
POST is handled here, before Django's change form would refuse it; it needs the model's
``change`` permission (every superuser has it).
"""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.urls import reverse
from django_fsm import ConcurrentTransition, Transition, TransitionNotAllowed
from django_fsm.admin import FSMAdminMixin

from core.admin.permissions import ActionPermissionsMixin

# A service call for one transition: (the record, the transition form's cleaned data) -> what
# was done, shown to the user.
TransitionService = Callable[..., str]


class HoldForm(forms.Form):
    """Why a crawl is held (shown by ``manage.py status`` and the admin)."""

    reason = forms.CharField(required=False, max_length=300)


class ServiceTransitionsMixin(ActionPermissionsMixin, FSMAdminMixin):
    """FSMAdminMixin whose buttons are ``fsm_services`` (transition name -> service call)."""

    fsm_fields = ["status"]
    change_form_template = "admin/vellum/transitions_change_form.html"
    save_on_top = True  # the buttons show above the record's inlines too
    fsm_services: dict[str, TransitionService] = {}
    fsm_labels: dict[str, str] = {}

    def is_fsm_transition_visible(self, transition: Transition) -> bool:
        return transition.name in self.fsm_services

    def get_fsm_label(self, transition: Transition) -> str:
        return self.fsm_labels.get(transition.name, transition.name.replace("_", " ").capitalize())

    @staticmethod
    def get_fsm_block_label(fsm_field_name: str) -> str:
        return "Change state"

    def _get_fsm_extra_context(self, *, request, obj) -> list:
        # A list, not the library's generator: the buttons are shown twice (top and bottom).
        return list(super()._get_fsm_extra_context(request=request, obj=obj))

    def change_view(self, request, object_id, form_url="", extra_context=None) -> HttpResponse:
        name = request.POST.get(self.fsm_post_param) if request.method == "POST" else None
        if name:
            return self._press(request, object_id, name)
        return super().change_view(request, object_id, form_url, extra_context)

    def fsm_transition_view(self, request, object_id, transition_name, **kwargs) -> HttpResponse:
        if not self.has_transition_permission(request) or transition_name not in self.fsm_services:
            raise PermissionDenied
        return super().fsm_transition_view(request, object_id, transition_name, **kwargs)

    def _press(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        if not self.has_transition_permission(request):
            raise PermissionDenied
        if name not in self.fsm_services:
            return HttpResponseBadRequest(f"No such button: {name}")
        obj = self.get_object(request, object_id)
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        transition = self._get_fsm_transition_by_name(obj=obj, transition_name=name)
        if self.get_fsm_transition_form(transition):
            return redirect(self._admin_url("transition", object_id=obj.pk, transition_name=name))
        self._apply_fsm_transition(obj=obj, transition_name=name, request=request)
        return redirect(self._admin_url("change", object_id=obj.pk))

    def _apply_fsm_transition(self, *, obj, transition_name, request, kwargs=None) -> bool:
        """Make the transition through its service; say what happened. Return True if done."""
        service = self.fsm_services[transition_name]
        label = self.fsm_labels.get(transition_name, transition_name)
        try:
            done = service(obj, **(kwargs or {}))
        except TransitionNotAllowed:
            obj.refresh_from_db(fields=["status"])
            self.message_user(
                request, f"{label}: not possible while {obj.status}.", level=messages.ERROR
            )
            return False
        except ConcurrentTransition:
            self.message_user(
                request, f"{label}: it changed meanwhile; try again.", level=messages.ERROR
            )
            return False
        self.message_user(request, done, level=messages.SUCCESS)
        return True

    def _admin_url(self, view: str, **kwargs) -> str:
        opts = self.model._meta
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", kwargs=kwargs)
