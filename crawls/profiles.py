"""Profiles: which extractors a crawl runs, in which order, and what a failure of each means.

A profile's steps are stored as JSON (``Profile.steps``), a list in run order::

    [{"extractor": "wget", "behaviour": "blocking"},
     {"extractor": "title"},
     {"extractor": "readability", "depends_on": ["dom"]},
     {"extractor": "headers", "behaviour": "finally"}]

A bare string (``"title"``) is a nonblocking step. Behaviours (DESIGN.md §4):

- ``blocking``: every later step waits for it; when it fails, the snapshot's remaining steps are
  stopped (skipped) and the snapshot fails;
- ``nonblocking`` (the default): its failure is recorded and the others go on;
- ``finally``: runs even after a blocking step failed (it still waits for blocking steps before it).

``depends_on`` names steps that must be final first (their outcome does not matter: readability
reads dom's output when there is one). An extractor's own needs (``Extractor.depends_on``) are
added when the profile runs that dependency too. The rules are checked by ``plan_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter

from django.core.exceptions import ValidationError

from core.extractors.registry import BY_NAME, default_profile
from crawls.choices import StepBehaviour


@dataclass(frozen=True)
class PlannedStep:
    """One step as a snapshot runs it: ``depends_on`` holds every extractor it waits for
    (its own, the extractor's, and each blocking step before it), in profile order."""

    extractor: str
    behaviour: str = StepBehaviour.NONBLOCKING
    depends_on: tuple[str, ...] = ()

    def as_json(self) -> dict:
        return {
            "extractor": self.extractor,
            "behaviour": str(self.behaviour),
            "depends_on": list(self.depends_on),
        }


def plan_steps(steps: object) -> list[PlannedStep]:
    """Check a profile's ``steps`` (JSON, shaped as in this module's docstring) and return them
    as PlannedSteps.

    Raises ValidationError naming the step (1-based) for: steps that are not a non-empty list, a
    step that is not a string or an object, an unknown extractor (the known ones are listed), an
    extractor listed twice, an unknown behaviour or key, a ``depends_on`` naming an extractor the
    profile does not run or the step itself, and a dependency cycle (named, with its path).
    """
    if not isinstance(steps, list) or not steps:
        raise ValidationError("a profile needs a list of at least one step")
    parsed = [_parse_step(position, raw) for position, raw in enumerate(steps, start=1)]
    names = [step.extractor for step in parsed]
    for position, step in enumerate(parsed, start=1):
        if step.extractor not in BY_NAME:
            known = ", ".join(BY_NAME)
            raise ValidationError(
                f"step {position}: unknown extractor {step.extractor!r} (known: {known})"
            )
        if names.index(step.extractor) != position - 1:
            raise ValidationError(f"step {position}: {step.extractor!r} is listed twice")
        for needed in step.depends_on:
            if needed == step.extractor:
                raise ValidationError(f"step {position}: {needed!r} cannot depend on itself")
            if needed not in names:
                raise ValidationError(
                    f"step {position}: {step.extractor!r} depends on {needed!r}, "
                    "which this profile does not run"
                )
    planned = _add_implicit_dependencies(parsed)
    _refuse_cycles(planned)
    return planned


def default_steps() -> list[PlannedStep]:
    """The built-in default: every extractor of settings.EXTRACTORS (all when empty), in
    registry order, nonblocking, with their own dependencies."""
    return plan_steps(list(default_profile()))


def _parse_step(position: int, raw: object) -> PlannedStep:
    if isinstance(raw, str):
        return PlannedStep(extractor=raw)
    if not isinstance(raw, dict):
        raise ValidationError(f"step {position}: expected an extractor name or an object")
    unknown_keys = set(raw) - {"extractor", "behaviour", "depends_on"}
    if unknown_keys:
        raise ValidationError(
            f"step {position}: unknown key(s) {', '.join(sorted(unknown_keys))} "
            "(a step has extractor, behaviour and depends_on)"
        )
    extractor = raw.get("extractor")
    if not isinstance(extractor, str) or not extractor:
        raise ValidationError(f"step {position}: 'extractor' must name an extractor")
    behaviour = raw.get("behaviour", StepBehaviour.NONBLOCKING)
    if behaviour not in StepBehaviour.values:
        raise ValidationError(
            f"step {position}: behaviour {behaviour!r} is not one of "
            f"{', '.join(StepBehaviour.values)}"
        )
    depends_on = raw.get("depends_on", [])
    if isinstance(depends_on, str):
        depends_on = [depends_on]
    if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
        raise ValidationError(f"step {position}: 'depends_on' must be a list of extractor names")
    return PlannedStep(extractor, StepBehaviour(behaviour), tuple(dict.fromkeys(depends_on)))


def _add_implicit_dependencies(steps: list[PlannedStep]) -> list[PlannedStep]:
    """Add each extractor's own dependencies (when the profile runs them) and every blocking
    step before it; keep the profile's order in each ``depends_on``."""
    names = [step.extractor for step in steps]
    planned = []
    for index, step in enumerate(steps):
        wanted = set(step.depends_on)
        wanted.update(name for name in BY_NAME[step.extractor].depends_on if name in names)
        wanted.update(
            earlier.extractor
            for earlier in steps[:index]
            if earlier.behaviour == StepBehaviour.BLOCKING
        )
        ordered = tuple(name for name in names if name in wanted)
        planned.append(PlannedStep(step.extractor, step.behaviour, ordered))
    return planned


def _refuse_cycles(steps: list[PlannedStep]) -> None:
    graph = {step.extractor: step.depends_on for step in steps}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        cycle = " → ".join(reversed(error.args[1]))
        raise ValidationError(
            f"dependency cycle: {cycle} (a step also waits for every blocking step before it)"
        ) from None
