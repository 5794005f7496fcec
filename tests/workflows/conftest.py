"""Fixtures for results, waiting and workflows: a migrated `Queue` per test and SQL
access to its tables (`queue`, `probe` and `start_worker` as the worker tests have)."""

from tests.worker.conftest import probe, queue, start_worker

__all__ = ["probe", "queue", "start_worker"]
