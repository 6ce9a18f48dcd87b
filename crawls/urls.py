from django.urls import path

from crawls import views

app_name = "crawls"

urlpatterns = [
    path("add/", views.add_page, name="add"),
    path("save/<path:url>", views.save_url, name="save"),
    path("crawl/<int:crawl_id>/", views.crawl_page, name="progress"),
    path("crawl/<int:crawl_id>/progress/", views.crawl_progress, name="progress_fragment"),
]
