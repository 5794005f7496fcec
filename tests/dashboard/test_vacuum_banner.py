"""The overview's warning banner when the xmin horizon is held back: it names the holding
session as `venturi healthcheck` does, with everything another session chose (its
application_name) escaped."""

from __future__ import annotations

import psycopg
import pytest
from werkzeug.test import Client

import venturi
from tests.support import wait_until
from venturi.dashboard import Dashboard, pages

HOSTILE = "<script>alert(1)</script>"


def banner(html: str) -> str:
    if 'id="vacuum-warning"' not in html:
        return ""
    return html.split('id="vacuum-warning"', 1)[1].split("</div>", 1)[0]


def page_with(client: Client, text: str) -> str | None:
    """The overview's HTML if its banner holds ``text``."""
    html = client.get("/").text
    return html if text in banner(html) else None


def test_the_banner_names_the_held_session_escaped_and_leaves_once_released(
    queue: venturi.Queue, database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "HELD_AFTER", 0.0)  # warn at once rather than after minutes
    client = Client(Dashboard(queue, allow_anonymous=True))
    with psycopg.connect(database_dsn, application_name=HOSTILE) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")
        mine = f"session pid {holder.info.backend_pid} "
        html = wait_until(
            lambda: page_with(client, mine), what="the banner naming the held session"
        )
        assert HOSTILE not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in banner(html)
        assert 'role="alert"' in html
        holder.rollback()
        wait_until(lambda: mine not in banner(client.get("/").text), what="the banner without it")
