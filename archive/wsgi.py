"""WSGI entry point (gunicorn serves ``archive.wsgi:application``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "archive.settings")
application = get_wsgi_application()
