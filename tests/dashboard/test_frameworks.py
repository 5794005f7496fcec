"""The dashboard mounted in Flask behind the app's callback, its actions and CSRF
working through Flask."""

from __future__ import annotations

import re

from flask import Flask, request

from tests.dashboard.scene import build_scene
from venturi.contrib.flask import Venturi, mount_dashboard
from venturi.models import JobStatus


def _token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match
    return match.group(1)


def test_flask_mounts_the_dashboard_behind_its_callback(database_dsn: str, prefix: str) -> None:
    app = Flask("dashboard_app")
    app.config.update(VENTURI_DSN=database_dsn, VENTURI_PREFIX=prefix, VENTURI_POOL_SIZE=2)
    app.secret_key = "flask-secret"
    extension = Venturi(app)
    mount_dashboard(
        app, extension, authorize=lambda: request.headers.get("X-Role") == "ops", url_prefix="/ops"
    )
    queue = extension.queue_for(app)
    queue.migrate()
    try:
        scene = build_scene(queue)
        client = app.test_client()
        assert client.get("/ops/").status_code == 403
        page = client.get("/ops/", headers={"X-Role": "ops"})
        assert page.status_code == 200
        assert 'href="/ops/jobs"' in page.text and 'href="/ops/static/dashboard.css"' in page.text
        job_page = client.get(f"/ops/jobs/{scene.ids['pending']}", headers={"X-Role": "ops"})
        sent = client.post(
            f"/ops/jobs/{scene.ids['pending']}/cancel",
            data={"csrf_token": _token(job_page.text), "next": "/ops/jobs"},
            headers={"X-Role": "ops"},
        )
        assert sent.status_code == 303 and sent.headers["Location"] == "/ops/jobs"
        assert scene.status(scene.ids["pending"]) is JobStatus.CANCELLED
        forged = client.post(
            f"/ops/jobs/{scene.ids['scheduled']}/cancel", headers={"X-Role": "ops"}
        )
        assert forged.status_code == 403
        assert scene.status(scene.ids["scheduled"]) is JobStatus.PENDING
    finally:
        extension.close(app)
