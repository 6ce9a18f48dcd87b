from django.apps import AppConfig


class CrawlsConfig(AppConfig):
    name = "crawls"
    verbose_name = "Crawls"

    def ready(self) -> None:
        from crawls import checks  # noqa: F401  (registers the system checks)
