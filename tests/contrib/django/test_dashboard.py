"""The dashboard as a Django view (``venturi.contrib.django.urls``): active staff users
by default, or a permission; its actions and CSRF working through Django."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import attrs

from tests.dashboard.scene import build_scene
from venturi import Queue


def _token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match
    return match.group(1)


@attrs.define
class User:
    """The attributes of a Django user the dashboard's check reads."""

    is_authenticated: bool = True
    is_active: bool = True
    is_staff: bool = False
    perms: tuple[str, ...] = ()

    def has_perm(self, perm: str) -> bool:
        return perm in self.perms


def test_django_serves_the_dashboard_to_staff(queue: Queue) -> None:
    from django.test import RequestFactory

    from venturi.contrib.django.dashboard import dashboard_view

    scene = build_scene(queue)
    factory = RequestFactory()

    def get(path: str, user: User) -> Any:
        http = factory.get("/venturi/" + path)
        http.user = user  # type: ignore[assignment]
        return dashboard_view(http, rest=path)

    assert get("", User(is_authenticated=False)).status_code == 403
    assert get("", User(is_staff=False)).status_code == 403
    assert get("", User(is_staff=True, is_active=False)).status_code == 403
    page = get(f"jobs/{scene.ids['scheduled']}", User(is_staff=True))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/venturi/jobs"' in html
    session = page.cookies["venturi_csrf"].value
    token = _token(html)  # bound to the session the cookie names
    post = factory.post(
        f"/venturi/jobs/{scene.ids['scheduled']}/retry",
        data=urlencode({"csrf_token": token, "next": "/venturi/jobs"}),
        content_type="application/x-www-form-urlencoded",
        HTTP_COOKIE=f"venturi_csrf={session}",
    )
    post.user = User(is_staff=True)  # type: ignore[assignment]
    done = dashboard_view(post, rest=f"jobs/{scene.ids['scheduled']}/retry")
    assert done.status_code == 303, done.content
    assert done["Location"] == "/venturi/jobs"
    assert [e.outcome.value for e in queue.journal(scene.ids["scheduled"])] == ["requeued"]
    assert "is%20due%20now" in done.cookies["venturi_notice"].value


def test_django_permission_setting_replaces_the_staff_check(queue: Queue, prefix: str) -> None:
    from django.test import RequestFactory
    from django.test.utils import override_settings

    from venturi.contrib.django.dashboard import dashboard_view

    settings = {"PREFIX": prefix, "DASHBOARD_PERMISSION": "ops.view_queue"}
    with override_settings(VENTURI={**settings, "DASHBOARD_READ_ONLY": True}):
        http = RequestFactory().get("/venturi/")
        http.user = User(is_staff=True)  # type: ignore[assignment]
        assert dashboard_view(http).status_code == 403
        http.user = User(perms=("ops.view_queue",))  # type: ignore[assignment]
        page = dashboard_view(http)
        assert page.status_code == 200 and 'id="read-only"' in page.content.decode()
