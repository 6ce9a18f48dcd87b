from django.apps import AppConfig


class CrawlsConfig(AppConfig):
    name = "crawls"
    verbose_name = "Crawls"

    def ready(self) -> None:
        # Imported for what they register: the system checks, and the receiver that queues a
        # sealed crawl's notification (the huey consumer finds crawls/tasks.py by itself).
        from crawls import checks, receivers  # noqa: F401
