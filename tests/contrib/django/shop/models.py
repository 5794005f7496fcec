from __future__ import annotations

from django.conf import settings
from django.db import models


class Order(models.Model):
    item: models.CharField[str, str] = models.CharField(max_length=100)
    status: models.CharField[str, str] = models.CharField(max_length=20, default="new")

    class Meta:
        app_label = "shop"
        # Per test run, so concurrent runs on one database never share the table.
        db_table = settings.SHOP_ORDERS_TABLE
