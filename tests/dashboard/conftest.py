"""Fixtures for the dashboard tests: a queue with jobs in every state and the WSGI app
over it, driven by werkzeug's test client."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from werkzeug.test import Client, TestResponse

import venturi
from tests.dashboard.scene import Scene, build_scene
from venturi.dashboard import Dashboard


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[venturi.Queue]:
    q = venturi.Queue(database_dsn, prefix=prefix, pool_size=4)
    q.migrate()
    yield q
    q.close()


@pytest.fixture
def scene(queue: venturi.Queue) -> Scene:
    return build_scene(queue)


@pytest.fixture
def client(scene: Scene) -> Client:
    return Client(Dashboard(scene.queue, page_size=3))


def csrf_token(response: TestResponse) -> str:
    """The CSRF token of the first form on a page."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', response.text)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)


def notice(response: TestResponse) -> str:
    match = re.search(r'id="notice">([^<]*)<', response.text)
    return match.group(1) if match else ""
