from django.urls import path

from .demoapp import views

urlpatterns = [
    path("widgets/<int:widget_id>/rename", views.rename_widget_view),
    path("widgets/<int:widget_id>/rename-on-commit", views.rename_widget_on_commit_view),
]
