"""The example Django shop run through PgBouncer, in a process of its own (Django's
settings are configured once per process): orders placed by requests (each enqueues its
job on Django's connection inside the ORM transaction), then a worker fulfils them.

Configured from SHOP_DSN (through the pooler), SHOP_LISTEN_DSN, SHOP_TABLE, SHOP_PREFIX
and SHOP_ORDERS; prints one JSON line: orders fulfilled, and whether the worker listened.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import django
    from django.conf import settings

    from tests.contrib.django.project import build_settings

    env = os.environ
    config = build_settings(env["SHOP_DSN"], env["SHOP_TABLE"], env["SHOP_PREFIX"])
    config["VENTURI"]["LISTEN_DSN"] = env["SHOP_LISTEN_DSN"]
    settings.configure(**config)
    django.setup()

    from django.db import connection
    from django.test import Client

    from tests.contrib.django.shop.models import Order
    from venturi.contrib.django import get_queue

    orders = int(env["SHOP_ORDERS"])
    with connection.schema_editor() as editor:
        editor.create_model(Order)
    try:
        queue = get_queue()
        queue.migrate()
        client = Client()
        for n in range(orders):
            response = client.post("/orders/", {"item": f"item {n}"})
            assert response.status_code == 200, response.content
        deadline = time.monotonic() + 60
        pause = threading.Event()
        with queue.worker(concurrency=4, poll_interval=60) as worker:
            while Order.objects.filter(status="fulfilled").count() < orders:
                assert time.monotonic() < deadline, "the orders were not fulfilled in 60 s"
                pause.wait(0.05)
            listening = worker.listening
        fulfilled = Order.objects.filter(status="fulfilled").count()
        print(json.dumps({"fulfilled": fulfilled, "listening": listening}))
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(Order)
        get_queue().close()
