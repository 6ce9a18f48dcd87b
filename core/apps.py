import gc

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Archive"

    def ready(self) -> None:
        from core import checks  # noqa: F401  (registers the system checks)

        resume_garbage_collection()


def resume_garbage_collection() -> None:
    """Turn the garbage collector back on if manage.py turned it off for start-up, with every
    object made so far frozen (``gc.freeze()``): they live as long as the process, and no
    collection walks them again."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
