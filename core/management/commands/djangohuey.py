"""``manage.py djangohuey --queue default``: django-huey's queue consumer (supervisord's ``huey``
program), which finds every installed app's ``tasks`` module (core/tasks.py, crawls/tasks.py).

django_huey is not an installed app, because importing it builds the queues and with them
huey's Redis and PostgreSQL clients: a fifth of a second and megabytes in every process, the
orchestrator and each management command included, for work only the consumer and a sealed
crawl's notification do. Its consumer command is offered here instead; the app itself adds
nothing else (no models, and a ready() that only wires huey-monitor, which Vellum does not use).
"""

from django_huey.management.commands.djangohuey import Command  # noqa: F401
