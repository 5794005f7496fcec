"""The dashboard's actions over plain WSGI requests: each one's effect in the tables,
the CSRF guard, confirmation of the bulk action, read-only mode and authentication."""

from __future__ import annotations

import base64

import pytest
from werkzeug.test import Client

import venturi
from tests.dashboard.conftest import csrf_token, notice
from tests.dashboard.scene import Scene
from venturi.dashboard import Dashboard
from venturi.models import JobStatus


def post(client: Client, path: str, **fields: str) -> str:
    """POST a form the way the page's own form does; returns the notice shown next."""
    token = csrf_token(client.get("/kinds"))
    sent = client.post(path, data={"csrf_token": token, "next": "/jobs", **fields})
    assert sent.status_code == 303, sent.text
    assert sent.headers["Location"] == "/jobs"
    return notice(client.get("/jobs"))


def journal_outcomes(scene: Scene, key: str) -> list[str]:
    return [e.outcome.value for e in scene.queue.journal(scene.ids[key])]


def test_cancel_a_pending_job(client: Client, scene: Scene) -> None:
    shown = post(client, f"/jobs/{scene.ids['pending']}/cancel")
    assert shown == f"cancelled {scene.ids['pending']}"
    assert scene.status(scene.ids["pending"]) is JobStatus.CANCELLED
    assert journal_outcomes(scene, "pending") == ["cancelled"]


def test_cancel_refuses_a_finished_job_and_changes_nothing(client: Client, scene: Scene) -> None:
    shown = post(client, f"/jobs/{scene.ids['completed']}/cancel")
    assert "only unfinished jobs can be cancelled" in shown
    assert scene.status(scene.ids["completed"]) is JobStatus.COMPLETED


def test_requeue_a_dead_job(client: Client, scene: Scene) -> None:
    assert post(client, f"/jobs/{scene.ids['dead']}/requeue") == f"requeued {scene.ids['dead']}"
    assert scene.status(scene.ids["dead"]) is JobStatus.PENDING
    assert journal_outcomes(scene, "dead")[-1] == "requeued"


def test_retry_now_makes_a_scheduled_job_due(client: Client, scene: Scene) -> None:
    before = scene.queue.get(scene.ids["scheduled"])
    assert before is not None
    assert post(client, f"/jobs/{scene.ids['scheduled']}/retry").endswith("is due now")
    after = scene.queue.get(scene.ids["scheduled"])
    assert after is not None and after.visible_at < before.visible_at
    assert after.visible_at <= scene.queue.store.now()
    assert journal_outcomes(scene, "scheduled") == ["requeued"]
    # Already due: nothing to do, and nothing journaled.
    assert "due later can be made due now" in post(client, f"/jobs/{scene.ids['scheduled']}/retry")
    assert journal_outcomes(scene, "scheduled") == ["requeued"]


def test_an_unknown_job_is_refused(client: Client) -> None:
    assert post(client, "/jobs/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel").startswith("refused: no job")


def test_requeue_all_dead_of_a_kind_asks_first(client: Client, scene: Scene) -> None:
    token = csrf_token(client.get("/dead"))
    asked = client.post("/dead/requeue", data={"csrf_token": token, "kind": "mail"})
    assert asked.status_code == 200
    assert "Requeue every dead mail job?" in asked.text
    assert scene.status(scene.ids["dead"]) is JobStatus.DEAD  # nothing yet
    confirm = {"csrf_token": token, "kind": "mail", "confirm": "yes", "next": "/dead"}
    done = client.post("/dead/requeue", data=confirm)
    assert done.status_code == 303
    assert notice(client.get("/dead")) == "requeued 2 dead mail jobs"
    assert scene.status(scene.ids["dead"]) is JobStatus.PENDING
    assert scene.status(scene.ids["dead_report"]) is JobStatus.DEAD  # another kind


def test_pause_and_resume_a_kind(client: Client, scene: Scene) -> None:
    assert post(client, "/kinds/pause", kind="mail") == "paused mail"
    assert scene.queue.paused() == {"mail"}
    assert post(client, "/kinds/pause", kind="mail") == "mail was already paused"
    assert post(client, "/kinds/resume", kind="mail") == "resumed mail"
    assert scene.queue.paused() == set()


def test_a_bad_kind_is_refused_and_nothing_is_written(client: Client, scene: Scene) -> None:
    assert post(client, "/kinds/pause", kind="").startswith("refused:")
    assert scene.queue.kinds() == []


@pytest.mark.parametrize("token", [None, "", "forged.0000", "wrong"])
def test_a_post_without_the_csrf_token_is_refused(
    client: Client, scene: Scene, token: str | None
) -> None:
    client.get("/")  # the cookie half of the token is set
    data = {} if token is None else {"csrf_token": token}
    refused = client.post(f"/jobs/{scene.ids['pending']}/cancel", data=data)
    assert refused.status_code == 403
    assert "CSRF" in refused.text
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING


def test_a_token_from_another_dashboard_is_refused(scene: Scene) -> None:
    other = Client(Dashboard(scene.queue))
    token = csrf_token(other.get("/kinds"))
    client = Client(Dashboard(scene.queue))
    client.set_cookie("venturi_csrf", token)
    refused = client.post(f"/jobs/{scene.ids['pending']}/cancel", data={"csrf_token": token})
    assert refused.status_code == 403
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING


def test_read_only_mode_shows_no_working_action_and_refuses_posts(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue, read_only=True))
    page = client.get(f"/jobs/{scene.ids['pending']}").text
    assert 'id="read-only"' in page
    assert '<form method="post"' not in page and "disabled" in page
    token = csrf_token(Client(Dashboard(scene.queue)).get("/kinds"))
    refused = client.post(f"/jobs/{scene.ids['pending']}/cancel", data={"csrf_token": token})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING


def test_after_an_action_only_pages_of_the_dashboard_are_followed(
    client: Client, scene: Scene
) -> None:
    token = csrf_token(client.get("/kinds"))
    for away in ["https://evil.example/", "//evil.example/", "/\\evil.example"]:
        sent = client.post("/kinds/pause", data={"csrf_token": token, "kind": "x", "next": away})
        assert sent.headers["Location"] == "/"


def basic(password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()}


def test_a_password_is_asked_for_every_request(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue, password="s3cret"))
    assert client.get("/").status_code == 401
    assert "Basic" in client.get("/").headers["WWW-Authenticate"]
    assert client.get("/", headers=basic("wrong")).status_code == 401
    assert client.get("/static/dashboard.css").status_code == 401
    assert client.get("/", headers=basic("s3cret")).status_code == 200


def test_authorize_refuses_requests(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue, authorize=lambda environ: "HTTP_X_OPS" in environ))
    assert client.get("/").status_code == 403
    assert client.get("/", headers={"X-Ops": "1"}).status_code == 200


def test_signal_a_job_from_its_page(client: Client, scene: Scene) -> None:
    job_id = scene.ids["scheduled"]
    page = client.get(f"/jobs/{job_id}")
    assert 'id="signal-form"' in page.text
    shown = post(client, f"/jobs/{job_id}/signal", name="approved", payload='{"by": "ann"}')
    assert shown == f"signalled {job_id} approved"
    record = scene.queue.get(job_id)
    assert record is not None and record.durable is not None
    assert [(s.name, s.payload) for s in record.durable.signals] == [("approved", {"by": "ann"})]
    assert journal_outcomes(scene, "scheduled")[-1] == "signalled"
    assert "approved" in client.get(f"/jobs/{job_id}").text


def test_a_signal_with_bad_json_or_to_a_finished_job_is_refused(
    client: Client, scene: Scene
) -> None:
    bad = post(client, f"/jobs/{scene.ids['scheduled']}/signal", name="x", payload="{nope")
    assert bad.startswith("refused: signal payload is not valid JSON")
    done = post(client, f"/jobs/{scene.ids['completed']}/signal", name="x")
    assert done.startswith("refused:") and "completed" in done
    for key in ("scheduled", "completed"):
        record = scene.queue.get(scene.ids[key])
        assert record is not None and record.durable is not None
        assert record.durable.signals == ()
    assert 'id="signal-form"' not in client.get(f"/jobs/{scene.ids['completed']}").text


def test_a_signal_without_the_csrf_token_is_refused(client: Client, scene: Scene) -> None:
    sent = client.post(f"/jobs/{scene.ids['scheduled']}/signal", data={"name": "x"})
    assert sent.status_code == 403
    record = scene.queue.get(scene.ids["scheduled"])
    assert record is not None and record.durable is not None and record.durable.signals == ()


def test_the_job_page_lists_durable_steps_and_the_wait_and_a_signal_wakes_it(
    client: Client, scene: Scene
) -> None:
    queue = scene.queue

    @queue.job("approval", context=True)
    def approval(ctx: venturi.JobContext) -> object:
        ctx.step("prepare", lambda: "ready")
        return ctx.wait_for("approved", timeout=3600)

    job_id = approval.enqueue()
    queue.drain(kinds=["approval"])
    page = client.get(f"/jobs/{job_id}").text
    assert 'id="steps"' in page and "prepare" in page and "wait_for:approved" in page
    assert 'id="waiting"' in page and "approved" in page
    shown = post(client, f"/jobs/{job_id}/signal", name="approved", payload='"yes"')
    assert shown == f"signalled {job_id} approved (woke it)"
    queue.drain(kinds=["approval"])
    assert queue.result(job_id) == "yes"
    assert 'id="waiting"' not in client.get(f"/jobs/{job_id}").text
