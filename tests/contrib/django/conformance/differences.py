"""The tests of Django's ``tests/tasks/`` that assert what venturi deliberately does
differently: each is expected to fail (a strict xfail, so one that starts passing fails
the run and leaves this list). Keyed by ``file::class::method``; each fails with an
``AssertionError`` of its own, unless its entry names the exception venturi's behaviour
raises instead (any other error is a real failure)."""

from __future__ import annotations

from typing import Final

import attrs


@attrs.frozen
class Difference:
    """Why venturi's behaviour differs from what the test asserts."""

    reason: str
    raises: str = "AssertionError"  # the name of the exception the test fails with


DIFFERENCES: Final[dict[str, Difference]] = {
    "test_immediate_backend.py::ImmediateBackendTransactionTestCase::"
    "test_doesnt_wait_until_transaction_commit_by_default": Difference(
        "venturi's enqueue joins the caller's transaction: a task enqueued inside "
        "transaction.atomic() is stored, and can run, only once the block commits "
        "(and never if it rolls back); ImmediateBackend runs it at once, before COMMIT"
    ),
    "test_immediate_backend.py::ImmediateBackendTestCase::test_cannot_get_result": Difference(
        "venturi keeps every result in the database (supports_get_result = True); "
        "ImmediateBackend keeps none, so get_result raises NotImplementedError there. "
        "Here get_result('123') says that no such result exists",
        raises="TaskResultDoesNotExist",
    ),
    "test_immediate_backend.py::ImmediateBackendTestCase::test_cannot_refresh_result": Difference(
        "as test_cannot_get_result: venturi's results can be read back and refreshed"
    ),
    "test_immediate_backend.py::ImmediateBackendTestCase::test_cannot_pass_run_after": Difference(
        "venturi defers tasks (supports_defer = True: run_after becomes the job's due "
        "time); ImmediateBackend cannot, so it refuses run_after"
    ),
    "test_dummy_backend.py::DummyBackendTestCase::test_refresh_result": Difference(
        "the test edits the result DummyBackend keeps in memory (object.__setattr__ on "
        "backend.results[0]) and expects refresh() to read the edit; venturi's results "
        "are rows, so an object changed in memory is not what is stored. refresh() "
        "re-reading the stored state is test_tasks.py's test_refresh_result"
    ),
    "test_dummy_backend.py::DummyBackendTestCase::test_refresh_result_async": Difference(
        "as test_refresh_result, through arefresh()"
    ),
}
