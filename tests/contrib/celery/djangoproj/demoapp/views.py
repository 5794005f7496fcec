"""Views that start tasks as Django projects on Celery do: inside the request's
transaction, and through ``transaction.on_commit``."""

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from .models import Widget
from .tasks import rename_widget


def rename_widget_view(request: HttpRequest, widget_id: int) -> JsonResponse:
    with transaction.atomic():
        widget = Widget.objects.select_for_update().get(id=widget_id)
        widget.name = "renaming"
        widget.save()
        result = rename_widget.delay(widget.id, request.POST["name"])
    return JsonResponse({"task": result.id})


def rename_widget_on_commit_view(request: HttpRequest, widget_id: int) -> JsonResponse:
    started: list[str] = []
    with transaction.atomic():
        transaction.on_commit(
            lambda: started.append(rename_widget.delay(widget_id, request.POST["name"]).id)
        )
    return JsonResponse({"task": started[0]})
