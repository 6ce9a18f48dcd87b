"""Where the orchestrator's and actors' logs go: files in DATA_DIR/logs/."""

from __future__ import annotations

import logging
import os
import sys

from django.conf import settings

FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
LOGGERS = ("crawls", "core", "orchestrator")


def log_to_file(filename: str, *, level: str | None = None, also_stderr: bool = False) -> None:
    """Send Vellum's loggers to ``DATA_DIR/logs/<filename>`` (and keep stderr if asked)."""
    settings.LOGS_DIR.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(settings.LOGS_DIR / filename)
    handler.setFormatter(logging.Formatter(FORMAT))
    for name in LOGGERS:
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


def log_forked_child_to_file(filename: str) -> None:
    """In a process forked from one that logs elsewhere (an actor forked by the orchestrator):
    send Vellum's loggers, and stdout and stderr, to ``DATA_DIR/logs/<filename>`` only.

    The parent's handlers of Vellum's loggers are dropped, and the standard streams are new
    objects on file descriptors 1 and 2, pointed at the file: the parent's may have been held
    by another of its threads (the progress display) at the moment of the fork, and would stay
    held in the child for ever.
    """
    settings.LOGS_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(settings.LOGS_DIR / filename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's own)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    for handler in logging.getLogger().handlers:
        if _is_stderr(handler):
            handler.stream = sys.stderr  # not setStream(): it flushes the old stream first
    for name in LOGGERS:
        for handler in list(logging.getLogger(name).handlers):
            logging.getLogger(name).removeHandler(handler)
    log_to_file(filename)
