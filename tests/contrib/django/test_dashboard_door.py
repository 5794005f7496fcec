"""The dashboard as a Django view keeps Django's doors (issue 36): its ALLOWED_HOSTS,
Secure cookies under CSRF_COOKIE_SECURE or over HTTPS, 400 for a bad query and a
clear 503 for a prefix without tables."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from tests.dashboard.scene import build_scene
from venturi import Queue


@attrs.define
class Staff:
    is_authenticated: bool = True
    is_active: bool = True
    is_staff: bool = True

    def has_perm(self, perm: str) -> bool:
        return False


def _get(path: str, **extra: Any) -> Any:
    from django.test import RequestFactory

    from venturi.contrib.django.dashboard import dashboard_view

    query = extra.pop("query", "")
    http = RequestFactory().get("/venturi/" + path + query, **extra)
    http.user = Staff()  # type: ignore[assignment]
    return dashboard_view(http, rest=path)


def test_a_host_outside_allowed_hosts_is_refused(queue: Queue) -> None:
    from django.core.exceptions import DisallowedHost

    assert _get("").status_code == 200  # testserver is allowed
    with pytest.raises(DisallowedHost):  # Django answers it with 400
        _get("", HTTP_HOST="evil.example")


def test_allowed_hosts_names_are_served(queue: Queue) -> None:
    from django.test.utils import override_settings

    with override_settings(ALLOWED_HOSTS=["ops.example.com"]):
        assert _get("", HTTP_HOST="ops.example.com").status_code == 200


def test_cookies_are_secure_under_csrf_cookie_secure(queue: Queue) -> None:
    from django.test.utils import override_settings

    assert not _get("").cookies["venturi_csrf"]["secure"]
    with override_settings(CSRF_COOKIE_SECURE=True):
        assert _get("").cookies["venturi_csrf"]["secure"]


def test_cookies_are_secure_over_https(queue: Queue) -> None:
    assert _get("", secure=True).cookies["venturi_csrf"]["secure"]


@pytest.mark.parametrize("query", ["?kind=a%00b", "?find=a%00b", "?status=nope"])
def test_a_bad_query_answers_400(queue: Queue, query: str) -> None:
    build_scene(queue)
    answer = _get("jobs", query=query)
    assert answer.status_code == 400, answer.content


def test_a_prefix_without_tables_answers_503(orders_table: str, prefix: str) -> None:
    from django.db import connections
    from django.test.utils import override_settings

    with override_settings(VENTURI={"PREFIX": prefix}):
        answer = _get("")
    connections.close_all()
    assert answer.status_code == 503
    assert f"the prefix {prefix} has no tables" in answer.content.decode()
