"""Fixtures for results, waiting and workflows: a migrated `Queue` per test, SQL access
to its tables, workers and worker processes (`queue`, `probe`, `start_worker` and
`fleet` as the worker tests have them)."""

from tests.worker.conftest import fleet, probe, queue, start_worker

__all__ = ["fleet", "probe", "queue", "start_worker"]
