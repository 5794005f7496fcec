from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("orders/", views.create_order),
    path("orders/on-commit/", views.create_order_on_commit),
    path("orders/task/", views.create_order_task),
]
