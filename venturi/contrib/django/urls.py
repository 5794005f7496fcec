"""The dashboard's URLs: ``path("venturi/", include("venturi.contrib.django.urls"))``.

Active staff users only, unless ``VENTURI["DASHBOARD_PERMISSION"]`` names the
permission to require; ``VENTURI["DASHBOARD_READ_ONLY"]`` turns the actions off."""

from __future__ import annotations

from django.urls import re_path

from .dashboard import dashboard_view

app_name = "venturi"
urlpatterns = [re_path(r"^(?P<rest>.*)$", dashboard_view, name="dashboard")]
