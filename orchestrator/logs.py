"""Where the orchestrator's and actors' logs go: files in DATA_DIR/logs/."""

from __future__ import annotations

import logging

from django.conf import settings

FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def log_to_file(filename: str, *, level: str | None = None, also_stderr: bool = False) -> None:
    """Send Vellum's loggers to ``DATA_DIR/logs/<filename>`` (and keep stderr if asked)."""
    settings.LOGS_DIR.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(settings.LOGS_DIR / filename)
    handler.setFormatter(logging.Formatter(FORMAT))
    for name in ("crawls", "core", "orchestrator"):
        logger = logging.getLogger(name)
        for stderr in [h for h in logger.handlers if _is_stderr(h)]:
            if also_stderr:
                stderr.setLevel(level or settings.LOG_LEVEL)
            else:
                logger.removeHandler(stderr)
        logger.addHandler(handler)
        logger.setLevel(level or settings.LOG_LEVEL)


def _is_stderr(handler: logging.Handler) -> bool:
    return type(handler) is logging.StreamHandler
