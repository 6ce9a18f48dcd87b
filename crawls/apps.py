from django.apps import AppConfig


class CrawlsConfig(AppConfig):
    name = "crawls"
    verbose_name = "Crawls"
