"""Helpers for testing code that enqueues jobs: assertions on what was enqueued, the
inline and manual modes, and a clock to move jobs through time. The pytest fixtures
(`venturi_dsn`, `venturi_queue`) come with the plugin `venturi.testing.pytest_plugin`,
which installing venturi registers."""

from venturi.testing.assertions import assert_enqueued, enqueued, refute_enqueued
from venturi.testing.clock import advance, parse_duration
from venturi.testing.database import database_for_tests
from venturi.testing.modes import inline, is_inline, manual, run_due, set_mode, start_inline
from venturi.testing.queues import QueueFactory

__all__ = [
    "QueueFactory",
    "advance",
    "assert_enqueued",
    "database_for_tests",
    "enqueued",
    "inline",
    "is_inline",
    "manual",
    "parse_duration",
    "refute_enqueued",
    "run_due",
    "set_mode",
    "start_inline",
]
