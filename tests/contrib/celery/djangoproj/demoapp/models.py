from __future__ import annotations

import os

from django.db import models


class Widget(models.Model):
    id: int
    name: models.CharField[str, str] = models.CharField(max_length=140)

    class Meta:
        app_label = "demoapp"
        # One table per test run, as each test has its own venturi prefix.
        db_table = f"{os.environ['CELERY_EXAMPLE_PREFIX']}_widget"
