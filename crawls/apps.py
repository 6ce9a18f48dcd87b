from django.apps import AppConfig


class CrawlsConfig(AppConfig):
    name = "crawls"
    verbose_name = "Crawls"

    def ready(self) -> None:
        # Imported for what they register: the system checks, and the receiver that queues a
        # sealed crawl's notification.
        from crawls import checks, tasks  # noqa: F401
