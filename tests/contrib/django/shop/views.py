from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from venturi.contrib import django as venturi_django

from .jobs import fulfil
from .models import Order


def create_order(request: HttpRequest) -> JsonResponse:
    """The order and the job that fulfils it commit together, or not at all."""
    with transaction.atomic():
        order = Order.objects.create(item=request.POST["item"])
        job_id = fulfil.enqueue(order_id=order.pk)
        if request.POST.get("fail"):
            raise RuntimeError("payment declined")  # rolls back the order and the job
    return JsonResponse({"order": order.pk, "job": str(job_id)})


def create_order_on_commit(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        order = Order.objects.create(item=request.POST["item"])
        venturi_django.enqueue_on_commit("shop.fulfil", {"order_id": order.pk})
        if request.POST.get("fail"):
            raise RuntimeError("payment declined")
    return JsonResponse({"order": order.pk})


def create_order_task(request: HttpRequest) -> JsonResponse:
    """The same through Django's Tasks framework."""
    from .tasks import ship

    with transaction.atomic():
        order = Order.objects.create(item=request.POST["item"])
        result = ship.enqueue(order_id=order.pk)
        if request.POST.get("fail"):
            raise RuntimeError("payment declined")
    return JsonResponse({"order": order.pk, "result": result.id})
