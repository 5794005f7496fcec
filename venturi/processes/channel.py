"""The pipe from each worker process to its group's supervisor: the child's settings
travel in one environment variable, its reports come back as JSON lines."""

from __future__ import annotations

import json
import os
from typing import Any, Final

import attrs

# The environment variable that makes a `venturi worker` command a supervised child.
CHILD_ENV: Final = "VENTURI_WORKER_CHILD"


@attrs.frozen
class ChildSettings:
    """What a worker process learns from its supervisor.

    ``fd`` is the write end of its report pipe, ``supervisor_pid`` its parent (a child
    whose parent changed was orphaned and stops), ``max_jobs`` the run count at which
    it reports at once (its supervisor recycles it), ``metrics`` whether it counts into
    the group's shared Prometheus directory.
    """

    fd: int
    supervisor_pid: int
    max_jobs: int | None = None
    metrics: bool = False

    def encode(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def decode(cls, text: str) -> ChildSettings:
        """Raises ValueError for text its supervisor did not write."""
        try:
            fields: Any = json.loads(text)
            return cls(
                fd=int(fields["fd"]),
                supervisor_pid=int(fields["supervisor_pid"]),
                max_jobs=None if fields.get("max_jobs") is None else int(fields["max_jobs"]),
                metrics=bool(fields.get("metrics", False)),
            )
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"{CHILD_ENV} is not a worker group's setting: {text!r}") from exc

    @classmethod
    def take_from_environment(cls) -> ChildSettings | None:
        """This process's settings, removed from the environment so that processes the
        handlers start are not taken for worker processes; None when not supervised."""
        text = os.environ.pop(CHILD_ENV, None)
        return None if text is None else cls.decode(text)


@attrs.frozen
class Report:
    """A worker process's state: ``ready`` once its worker runs, ``jobs`` runs ended so
    far, ``rss`` its resident memory in bytes."""

    ready: bool = False
    jobs: int = 0
    rss: int = 0

    def encode(self) -> bytes:
        return (json.dumps(attrs.asdict(self)) + "\n").encode()

    @classmethod
    def decode(cls, line: bytes) -> Report:
        """Raises ValueError for a line that is not a report."""
        try:
            fields: Any = json.loads(line)
            return cls(bool(fields["ready"]), int(fields["jobs"]), int(fields["rss"]))
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not a worker report: {line!r}") from exc
