"""`venturi demo`: a realistic mixed batch run by a real worker, with a live progress bar
and a summary of what happened (the CLI picks the database, see `venturi.cli.demo_command`)."""

from __future__ import annotations

import collections
import hashlib
import json
import random
import threading
import time
from typing import Any, Final

import attrs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from ulid import ULID

from venturi.backoff import exponential
from venturi.cli.render import journal_table, table
from venturi.client import Queue
from venturi.context import JobContext
from venturi.errors import VenturiError
from venturi.events import WorkerEvents
from venturi.models import JobRecord, JournalRecord, NewJob, Outcome
from venturi.outcomes import Fail, Pause
from venturi.settlements import Settlement

KINDS: Final = ("images.resize", "emails.send", "reports.build", "search.reindex", "invoices.send")
PAGES_PER_RUN: Final = 2
DEFAULT_TIMEOUT: Final = 300.0


# -- the demo's jobs ---------------------------------------------------------------------


def resize(image_id: int, width: int) -> dict[str, Any]:
    """Make a thumbnail (a little real CPU work stands in for the image library)."""
    digest = hashlib.sha256(f"{image_id}:{width}".encode() * 256).hexdigest()
    return {"thumbnail": f"thumbs/{image_id}-{width}.webp", "etag": digest[:12]}


def send_email(ctx: JobContext, to: str, template: str, flaky: int) -> None:
    """Send a mail; the first ``flaky`` attempts meet a (simulated) SMTP timeout."""
    if ctx.failures < flaky:
        raise ConnectionError(f"SMTP server timed out (simulated; attempt {ctx.attempt})")
    ctx.note(f"{template} mail delivered to {to}")


def build_report(ctx: JobContext, report: int, pages: int) -> dict[str, Any]:
    """Render a long report a few pages per run, pausing with a checkpoint in between."""
    done = min(pages, (ctx.carry or {}).get("pages_done", 0) + PAGES_PER_RUN)
    if done < pages:
        note = f"rendered {done}/{pages} pages; carry pages_done={done} to the next run"
        raise Pause(after=0.05, carry={"pages_done": done}, note=note)
    return {"report": report, "pages": pages, "runs": ctx.attempt}


def reindex(customer: int, documents: list[int]) -> dict[str, Any]:
    """Reindex a customer's changed documents; queued updates merge into one job."""
    return {"customer": customer, "documents": len(documents)}


def merge_documents(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Dedup merge: one pending reindex per customer, holding every changed document."""
    return {
        "customer": old["customer"],
        "documents": sorted({*old["documents"], *new["documents"]}),
    }


def send_invoice(invoice: int, customer: int | None, amount_cents: int) -> dict[str, Any]:
    """Send an invoice at its due time; one without a customer is poison (dead at once)."""
    if customer is None:
        raise Fail(f"invoice {invoice} has no customer; retrying cannot help")
    return {"invoice": invoice, "amount_cents": amount_cents}


def register_demo_jobs(queue: Queue) -> None:
    """Register the demo's five kinds; backoffs are short so the demo stays quick."""
    quick = exponential(base=0.05, cap=0.4)
    queue.job("images.resize", lease=30)(resize)
    queue.job("emails.send", max_attempts=4, backoff=quick, context=True)(send_email)
    queue.job("reports.build", context=True)(build_report)
    queue.job("search.reindex")(reindex)
    queue.job("invoices.send", max_attempts=3, backoff=quick)(send_invoice)


def compose_batch(queue: Queue, requests: int, rng: random.Random) -> list[NewJob]:
    """``requests`` enqueue requests over the demo's kinds. The first email always fails
    and the first invoice is always poison, so even a tiny batch has dead jobs."""
    invoices = max(2, requests * 5 // 100)
    reports = max(1, requests * 4 // 100)
    emails = max(2, requests * 20 // 100)
    updates = max(2, requests * 15 // 100)
    images = max(1, requests - invoices - reports - emails - updates)
    customers = max(1, updates // 6)
    batch = [
        queue.new_job(
            "images.resize",
            {"image_id": i, "width": rng.choice([128, 256, 512])},
            priority=5 if rng.random() < 0.1 else 0,
        )
        for i in range(images)
    ]
    for i in range(emails):
        flaky = 99 if i == 0 or rng.random() < 0.02 else rng.choices([0, 1, 2], [70, 22, 8])[0]
        payload = {"to": f"user{i}@example.com", "template": "welcome", "flaky": flaky}
        batch.append(queue.new_job("emails.send", payload))
    for i in range(reports):
        batch.append(queue.new_job("reports.build", {"report": i, "pages": rng.randint(3, 8)}))
    for _ in range(updates):
        customer = rng.randrange(customers)
        payload = {"customer": customer, "documents": [rng.randrange(10_000)]}
        key = f"customer:{customer}"
        batch.append(
            queue.new_job("search.reindex", payload, dedup_key=key, on_duplicate=merge_documents)
        )
    for i in range(invoices):
        payer = None if i == 0 or rng.random() < 0.06 else rng.randrange(1000)
        payload = {"invoice": i, "customer": payer, "amount_cents": rng.randrange(100, 99_999)}
        batch.append(queue.new_job("invoices.send", payload, delay=rng.uniform(0.2, 1.0)))
    rng.shuffle(batch)
    return batch


# -- running it --------------------------------------------------------------------------


class Tally(WorkerEvents):
    """Counts runs by kind and outcome as the worker settles them; `done` is set once
    ``target`` jobs reached a final state."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.counts: collections.Counter[tuple[str, Outcome]] = collections.Counter()
        self.finished = 0
        self.runs = 0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def count(self, kind: str, outcome: Outcome) -> int:
        with self._lock:
            return self.counts[(kind, outcome)]

    def total(self, outcome: Outcome) -> int:
        with self._lock:
            return sum(n for (_, o), n in self.counts.items() if o is outcome)

    def _record(self, kind: str, outcome: Outcome, run: bool) -> None:
        with self._lock:
            self.counts[(kind, outcome)] += 1
            self.runs += run
            if outcome in (Outcome.COMPLETED, Outcome.DEAD):
                self.finished += 1
            if self.finished >= self.target:
                self.done.set()

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Outcome | None, duration: float
    ) -> None:
        if outcome is not None:
            self._record(job.kind, outcome, run=True)

    def job_recovered(self, job: JobRecord, outcome: Outcome) -> None:
        self._record(job.kind, outcome, run=False)


class DemoTimeout(VenturiError):
    """The demo's jobs did not all finish in time."""


@attrs.frozen
class DemoReport:
    """What one demo run did."""

    prefix: str
    requested: dict[str, int]
    jobs: dict[str, int]
    tally: Tally
    completed: dict[str, int]
    dead: dict[str, int]
    elapsed: float
    sample: JobRecord | None
    sample_journal: list[JournalRecord]

    @property
    def finished(self) -> int:
        return sum(self.completed.values()) + sum(self.dead.values())


def run_demo(
    queue: Queue,
    out: Console,
    *,
    requests: int = 3000,
    concurrency: int = 8,
    seed: int = 7,
    timeout: float = DEFAULT_TIMEOUT,
) -> DemoReport:
    """Register the demo's jobs on ``queue`` (a fresh prefix), enqueue the batch, run a
    worker until every job finished, and report. Raises `DemoTimeout` after ``timeout``."""
    register_demo_jobs(queue)
    queue.migrate()
    batch = compose_batch(queue, requests, random.Random(seed))
    out.print(f"Enqueueing {len(batch)} jobs under prefix [bold]{queue.prefix}[/] ...")
    ids = queue.enqueue_many(batch)
    tally = Tally(len(set(ids)))  # merged enqueues share an id
    worker = queue.worker(concurrency=concurrency, poll_interval=0.5, events=tally)
    started = time.monotonic()
    try:
        _watch(worker.start, tally, out, timeout)
        elapsed = time.monotonic() - started
    finally:
        worker.stop()
    return _report(queue, batch, ids, tally, elapsed)


def _report(
    queue: Queue, batch: list[NewJob], ids: list[ULID], tally: Tally, elapsed: float
) -> DemoReport:
    snapshot = {k.kind: k for k in queue.stats().kinds}
    reports = [
        (job.payload["pages"], i)
        for i, job in zip(ids, batch, strict=True)
        if job.kind == "reports.build"
    ]
    sample_id = max(reports)[1] if reports else None  # the one that paused most
    return DemoReport(
        prefix=queue.prefix,
        requested=dict(collections.Counter(job.kind for job in batch)),
        jobs=dict(
            collections.Counter(job.kind for job in dict(zip(ids, batch, strict=True)).values())
        ),
        tally=tally,
        completed={kind: snapshot[kind].completed for kind in snapshot},
        dead={kind: snapshot[kind].dead for kind in snapshot},
        elapsed=elapsed,
        sample=None if sample_id is None else queue.get(sample_id),
        sample_journal=[] if sample_id is None else queue.journal(sample_id),
    )


def _watch(start: Any, tally: Tally, out: Console, timeout: float) -> None:
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    deadline = time.monotonic() + timeout
    with Progress(*columns, console=out) as progress:
        task = progress.add_task("jobs finished", total=tally.target, detail="")
        start()
        while True:
            done = tally.done.wait(0.1)
            detail = (
                f"runs {tally.runs} · retried {tally.total(Outcome.RETRIED)} · "
                f"paused {tally.total(Outcome.PAUSED)} · dead {tally.total(Outcome.DEAD)}"
            )
            progress.update(task, completed=tally.finished, detail=detail)
            if done:
                return
            if time.monotonic() > deadline:
                raise DemoTimeout(
                    f"only {tally.finished} of {tally.target} demo jobs finished within "
                    f"{timeout:g}s"
                )


def drop_tables(queue: Queue) -> None:
    """Remove the demo prefix's tables."""
    queue.drop_prefix()


# -- reporting ---------------------------------------------------------------------------


def render_report(report: DemoReport, out: Console) -> None:
    """Print throughput, outcomes per kind and one job's journal."""
    requested = sum(report.requested.values())
    jobs = sum(report.jobs.values())
    rate = report.finished / report.elapsed if report.elapsed else 0.0
    runs = report.tally.runs
    out.print(
        f"\n[bold]{requested}[/] enqueue requests became [bold]{jobs}[/] jobs (dedup merged "
        f"{requested - jobs}); all {report.finished} finished in {report.elapsed:.1f}s: "
        f"[bold]{rate:.0f} jobs/s[/] ({runs} runs, {runs / max(report.elapsed, 1e-9):.0f} runs/s)"
    )
    counts = ("enqueued", "jobs", "merged", "runs", "retried", "paused", "completed", "dead")
    grid = table("kind", *counts, title="outcomes per kind")
    for column in grid.columns[1:]:
        column.justify = "right"
    grid.columns[-1].style = "red"
    for kind in KINDS:
        runs_of_kind = sum(report.tally.count(kind, o) for o in Outcome)
        grid.add_row(
            kind,
            str(report.requested.get(kind, 0)),
            str(report.jobs.get(kind, 0)),
            str(report.requested.get(kind, 0) - report.jobs.get(kind, 0)),
            str(runs_of_kind),
            str(report.tally.count(kind, Outcome.RETRIED)),
            str(report.tally.count(kind, Outcome.PAUSED)),
            str(report.completed.get(kind, 0)),
            str(report.dead.get(kind, 0)),
        )
    out.print(grid)
    if report.sample is not None:
        job = report.sample
        title = f"journal of {job.kind} job {job.id}: paused, resumed with its carry"
        out.print(journal_table(report.sample_journal, title=title))
        out.print(f"payload {json.dumps(job.payload)}, last carry {json.dumps(job.carry)}")
