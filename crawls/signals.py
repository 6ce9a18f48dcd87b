"""What a crawl announces to whoever listens.

The services that seal a crawl do not know who acts on it; crawls/receivers.py connects the
receiver that queues the crawl's notification. This keeps the import direction (DESIGN.md §1):
services never import the huey tasks that call them.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent with ``crawl`` once a crawl that asks to be notified (a webhook or an email address) has
# sealed and the seal has committed.
notification_due = Signal()
