"""Every page of the dashboard over plain WSGI requests, against a queue with jobs in
every state."""

from __future__ import annotations

import re

import pytest
from ulid import ULID
from werkzeug.test import Client

from tests.dashboard.scene import Scene
from venturi import NewJob
from venturi.dashboard import Dashboard
from venturi.flow.limits import KindLimits


def rows_of(html: str, table_id: str) -> list[str]:
    table = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr data-\w+=\"([^\"]+)\"", table)


def test_overview_counts_every_state_exactly_on_a_small_table(client: Client, scene: Scene) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert "All figures are exact counts." in html
    mail = html.split('data-kind="mail"', 1)[1].split("</tr>", 1)[0]
    figures = dict(re.findall(r'data-field="(\w+)">(?:<a [^>]*>)?([^<]+)<', mail))
    assert figures["pending"] == "1"
    assert figures["scheduled"] == "1"
    assert figures["waiting"] == "1"
    assert figures["completed"] == "1"
    assert figures["dead"] == "2"
    assert figures["cancelled"] == "1"
    assert figures["hour"] == "1 ok / 2 failed"
    report = html.split('data-kind="report"', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="claimed">1<' in report
    assert "66.7%" in mail  # two of three runs failed
    assert 'role="img"' in mail  # the hour's chart


def test_overview_marks_estimates_on_a_large_table(scene: Scene, database_dsn: str) -> None:
    import psycopg

    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(f"ANALYZE {scene.queue.store.prefix.jobs}")
    figures = scene.queue.store.reads.overview(exact_below=1)
    assert figures.estimated and figures.analyzed_at is not None
    mail = {k.kind: k for k in figures.kinds}["mail"]
    # Counted from the partial indexes: exact.
    assert (mail.pending, mail.scheduled) == (1, 1)
    # From ANALYZE's joint statistics: on a table this small it saw every row.
    assert (mail.completed, mail.dead, mail.cancelled, mail.waiting) == (1, 2, 1, 1)
    # A combination the statistics do not list is unknown, below the smallest listed.
    report = {k.kind: k for k in figures.kinds}["report"]
    assert report.cancelled is None and report.completed is None
    assert figures.estimate_floor == 1


def test_jobs_page_pages_by_keyset_newest_first(client: Client, scene: Scene) -> None:
    first = client.get("/jobs")
    ids = rows_of(first.text, "jobs-table")
    assert len(ids) == 3
    assert ids == sorted(ids, reverse=True)
    before = re.search(r'id="next-page" href="[^"]*before=(\w+)"', first.text)
    assert before and before.group(1) == ids[-1]
    second = client.get(f"/jobs?before={ids[-1]}")
    more = rows_of(second.text, "jobs-table")
    assert more and max(more) < min(ids)
    assert "OFFSET" not in first.text


@pytest.mark.parametrize("status", ["dead", "pending", "waiting", "claimed", "cancelled"])
def test_jobs_page_filters_by_status(client: Client, scene: Scene, status: str) -> None:
    ids = rows_of(client.get(f"/jobs?status={status}").text, "jobs-table")
    assert str(scene.ids[status]) in ids
    assert all(scene.status(ULID.from_str(i)).value == status for i in ids)


def test_jobs_page_filters_by_kind_and_status(client: Client, scene: Scene) -> None:
    ids = rows_of(client.get("/jobs?kind=report&status=dead").text, "jobs-table")
    assert ids == [str(scene.ids["dead_report"])]


def test_jobs_page_finds_by_id_and_by_dedup_key(client: Client, scene: Scene) -> None:
    by_id = rows_of(client.get(f"/jobs?find={scene.ids['dead']}").text, "jobs-table")
    assert by_id == [str(scene.ids["dead"])]
    by_key = rows_of(client.get("/jobs?find=invoice:7").text, "jobs-table")
    assert by_key == [str(scene.ids["pending"])]
    assert rows_of(client.get("/jobs?find=nothing-holds-this").text, "jobs-table") == []
    # A running holder is found too; a finished one only by its id.
    held = scene.queue.enqueue("report", {"n": 8}, dedup_key="report:8")
    assert [j.id for j in scene.queue.store.claim("w", {"report": 30.0}, 1)] == [held]
    assert rows_of(client.get("/jobs?find=report:8").text, "jobs-table") == [str(held)]
    assert scene.queue.cancel(held)
    assert rows_of(client.get("/jobs?find=report:8").text, "jobs-table") == []


def test_a_bad_cursor_is_a_clear_400(client: Client) -> None:
    page = client.get("/jobs?before=not-an-id")
    assert page.status_code == 400
    assert "not-an-id" in page.text


def test_job_page_shows_payload_result_and_journal(client: Client, scene: Scene) -> None:
    html = client.get(f"/jobs/{scene.ids['completed']}").text
    assert '"n": 1' in html.split('id="payload">', 1)[1].split("</pre>", 1)[0]
    result = html.split('id="result">', 1)[1].split("</pre>", 1)[0]
    assert '"sent": 1' in result
    journal = html.split('id="journal">', 1)[1].split("</ol>", 1)[0]
    assert "<strong>completed</strong> · run 1" in journal


def test_job_page_shows_why_a_job_died_and_who_holds_one(client: Client, scene: Scene) -> None:
    dead = client.get(f"/jobs/{scene.ids['dead']}").text
    assert "bad address -1" in dead and "Requeue job" in dead
    held = client.get(f"/jobs/{scene.ids['claimed']}").text
    assert "scene-worker" in held and "Cancel job" in held
    scheduled = client.get(f"/jobs/{scene.ids['scheduled']}").text
    assert "Run now" in scheduled


def test_what_jobs_hold_is_escaped(client: Client, scene: Scene) -> None:
    hostile = "<script>alert(1)</script>"
    job_id = scene.queue.enqueue("mail", {"n": 9}, dedup_key=hostile)
    html = client.get(f"/jobs/{job_id}").text + client.get("/jobs?find=" + hostile).text
    assert hostile not in html
    assert "&lt;script&gt;" in html


def test_unknown_job_and_page_are_404(client: Client) -> None:
    assert client.get("/jobs/01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 404
    assert client.get("/nowhere").status_code == 404


def test_dead_letters_are_grouped_by_kind_and_first_line(client: Client, scene: Scene) -> None:
    html = client.get("/dead").text
    mail = html.split('data-kind="mail"', 1)[1].split("</section>", 1)[0]
    assert "bad address -1" in mail and "bad address -2" in mail
    assert "second line" not in mail
    report = html.split('data-kind="report"', 1)[1].split("</section>", 1)[0]
    assert "disk full" in report


def test_workers_kinds_schedules_and_workflow_pages(client: Client, scene: Scene) -> None:
    assert "No worker is running." in client.get("/workers").text
    scene.queue.pause("report")
    kinds = client.get("/kinds").text
    assert rows_of(kinds, "kinds-table") == ["report", "mail"]
    assert "Resume report" in kinds and "Pause mail" in kinds
    assert client.get("/schedules").status_code == 200
    flow = client.get(f"/workflows/{scene.workflow_id}").text
    assert str(scene.ids["waiting"]) in flow and "waiting" in flow
    found = client.get(f"/workflows?id={scene.workflow_id}")
    assert found.status_code == 303
    assert client.get("/workflows/01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 404


def test_live_pages_answer_partial_requests_with_the_main_region(client: Client) -> None:
    full = client.get("/")
    part = client.get("/", headers={"X-Venturi-Partial": "1"})
    assert "<html" in full.text and 'data-live="1"' in full.text
    assert "<html" not in part.text and "overview-table" in part.text


def test_static_files_are_served_from_the_package(client: Client) -> None:
    script = client.get("/static/dashboard.js")
    assert script.status_code == 200 and "X-Venturi-Partial" in script.text
    assert client.get("/static/dashboard.css").status_code == 200
    assert client.get("/static/../app.py").status_code == 404


def test_pages_link_below_the_mount_point(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue))
    html = client.get("/", environ_overrides={"SCRIPT_NAME": "/ops/queue"}).text
    assert 'href="/ops/queue/static/dashboard.css"' in html
    assert 'href="/ops/queue/jobs"' in html


def test_bad_dashboard_options_are_refused(scene: Scene) -> None:
    with pytest.raises(ValueError, match="refresh_seconds"):
        Dashboard(scene.queue, refresh_seconds=0)
    with pytest.raises(ValueError, match="page_size"):
        Dashboard(scene.queue, page_size=0)
    with pytest.raises(ValueError, match="password"):
        Dashboard(scene.queue, password="")


def test_kinds_page_lists_a_fair_kinds_busiest_keys_escaped(client: Client, scene: Scene) -> None:
    queue = scene.queue
    queue.store.declare_kinds([KindLimits("render", fair=True)], "test")
    hostile = "<b>tenant</b>"
    queue.enqueue_many(
        [NewJob("render", {"n": n}, concurrency_key="tenant:big") for n in range(5)]
        + [NewJob("render", {"n": 0}, concurrency_key=hostile)]
    )
    queue.set_weights("render", {"tenant:big": 3})
    html = client.get("/kinds").text
    table = html.split('class="grid fair-keys" data-kind="render"', 1)[1].split("</table>", 1)[0]
    assert table.index("tenant:big") < table.index("&lt;b&gt;tenant&lt;/b&gt;")
    assert '<td class="num">5</td>' in table and "3.0" in table
    assert hostile not in html
    assert '<span class="badge">fair</span>' in html
