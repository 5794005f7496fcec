"""What a queue reports about itself beyond its jobs: the worker registry, the
overview's per-kind figures (exact or estimated), throughput and dead-letter groups."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs
from ulid import ULID


@attrs.frozen
class WorkerPresence:
    """What a running worker writes into the registry at each heartbeat."""

    name: str
    kinds: tuple[str, ...]
    concurrency: int
    beat_every: float
    host: str = attrs.field(factory=socket.gethostname)
    pid: int = attrs.field(factory=os.getpid)


@attrs.frozen
class WorkerInfo:
    """One live worker as the registry holds it."""

    name: str
    host: str
    pid: int
    kinds: tuple[str, ...]
    concurrency: int
    running: int
    beat_every: float
    started_at: datetime
    last_seen: datetime
    taken_at: datetime

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> WorkerInfo:
        """From a row of ``sql/workers_list.sql``."""
        name, host, pid, kinds, concurrency, running, beat_every, started, seen, taken = row
        return cls(
            name, host, pid, tuple(kinds), concurrency, running, beat_every, started, seen, taken
        )

    @property
    def seen_seconds_ago(self) -> float:
        return max(0.0, (self.taken_at - self.last_seen).total_seconds())


@attrs.frozen
class KindOverview:
    """One kind's jobs by status. ``pending`` (due), ``scheduled``, ``claimed`` and the
    oldest wait are always exact; the others are estimates when the overview is
    ``estimated``, and None when too few for the statistics to list (fewer than
    `Overview.estimate_floor`)."""

    kind: str
    pending: int = 0
    scheduled: int = 0
    claimed: int = 0
    waiting: int | None = 0
    completed: int | None = 0
    dead: int | None = 0
    cancelled: int | None = 0
    oldest_pending_seconds: float | None = None
    paused: bool = False


@attrs.frozen
class Overview:
    """Every kind's figures at one moment. ``estimated``: waiting, completed, dead and
    cancelled come from the planner's statistics (as of ``analyzed_at``), not a count;
    a figure the statistics do not list is below ``estimate_floor``, their smallest."""

    kinds: tuple[KindOverview, ...]
    taken_at: datetime
    estimated: bool
    table_rows: int
    analyzed_at: datetime | None
    estimate_floor: int = 0


@attrs.frozen
class ThroughputBucket:
    """Runs of one kind that ended in one time bucket: completed, and failed (retried or
    dead)."""

    kind: str
    start: datetime
    completed: int
    failed: int


@attrs.frozen
class Throughput:
    """The journal's finished runs per kind and bucket over a recent window."""

    buckets: tuple[ThroughputBucket, ...]
    window_minutes: int
    bucket_minutes: int
    taken_at: datetime

    def totals(self, kind: str) -> tuple[int, int]:
        """(completed, failed) of ``kind`` over the whole window."""
        mine = [b for b in self.buckets if b.kind == kind]
        return sum(b.completed for b in mine), sum(b.failed for b in mine)


@attrs.frozen
class DeadGroup:
    """Dead jobs of one kind that died of the same thing (their last note's first line)."""

    kind: str
    error: str
    count: int
    newest_at: datetime
    newest_ids: tuple[ULID, ...]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> DeadGroup:
        kind, error, count, newest_at, ids = row
        return cls(kind, error, count, newest_at, tuple(ULID.from_uuid(i) for i in ids))
