"""Settlements that end a run without completing it (retry, pause, dead, release), and the
reaper's recovery: one statement at a time, or many runs in one transaction with one
commit. `PostgresStore` inherits these operations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg
from psycopg import errors

from venturi.errors import StoreError, StoreUnavailable
from venturi.models import Outcome
from venturi.settlements import BUSY, Busy, Claim, SettleAction, Settlement
from venturi.store import retrying, sqlfiles
from venturi.store.housekeeping import Housekeeping
from venturi.store.statements import run_statement

# How often a re-pend runs again after racing enqueues took its job's dedup key.
_REPEND_ATTEMPTS: Final = 5
SETTLE_FILES: Final = {
    SettleAction.RETRY: "fail_run",
    SettleAction.PAUSE: "settle_pause",
    SettleAction.DEAD: "settle_dead",
    SettleAction.RELEASE: "settle_release",
}
Written = Outcome | Busy | StoreError | None


def settle_params(claim: Claim, settlement: Settlement) -> dict[str, Any]:
    """The named parameters of a settlement's statement (`SETTLE_FILES`)."""
    carry = settlement.carry_json
    return {
        "id": claim.job_id.to_uuid(),
        "owner": claim.claimed_by,
        "run": claim.run_count,
        "lapsed": False,
        "delay": settlement.delay,
        "at": settlement.at,
        "set_carry": carry is not None,
        "carry": carry,
        "note": settlement.note,
        "facts": settlement.facts_json,
    }


def _outcome(rows: list[tuple[Any, ...]]) -> Outcome | Busy | None:
    if not rows:
        return None
    return BUSY if rows[0][0] is None else Outcome(rows[0][0])


def _while_key_taken(name: str, run: Callable[[], list[tuple[Any, ...]]]) -> Outcome | Busy | None:
    """`_outcome` of ``run()``, run again while it fails because a racing enqueue took
    the job's dedup key (a few times at most; then `StoreUnavailable`)."""
    for _ in range(_REPEND_ATTEMPTS):
        try:
            return _outcome(run())
        except errors.UniqueViolation as exc:
            taken = exc
    raise StoreUnavailable(
        f"{name}: enqueues kept taking the job's dedup key ({_REPEND_ATTEMPTS} tries)"
    ) from taken


class Repending(Housekeeping):
    """Operations of `PostgresStore` that put a claimed job back to pending or end it."""

    def _repend(self, name: str, params: dict[str, Any]) -> Outcome | Busy | None:
        """Run a statement that may put a job back to pending: the journal outcome when
        it applied, None when fenced out, `BUSY` when another session held the row locked.

        Re-pending gives up the job's dedup key when a newer pending job holds it, but a
        racing enqueue can take the key between that check and the write. The statement
        then fails having changed nothing, so it runs again (a few times at most)."""
        return _while_key_taken(name, lambda: self._fetch(name, params))

    def _settle_many(self, items: Sequence[tuple[Claim, Settlement]]) -> list[Written]:
        """Write settlements other than completions, each as `Store.settle` would, one
        transaction (one commit) per kind of settlement, each in job id order; returns
        what each did, in order (`BUSY`: its row was locked by another session and nothing
        changed for it). A statement the database refuses for one run is undone alone (a
        savepoint) and its `StoreError` stands in its place; a passing error raises,
        having changed nothing of its group (groups already committed stay)."""
        if any(settlement.action not in SETTLE_FILES for _, settlement in items):
            raise ValueError("settle_many writes no completion (complete_many does)")
        written: dict[int, Written] = {}
        for action, name in SETTLE_FILES.items():
            mine = sorted(
                (i for i, (_, s) in enumerate(items) if s.action is action),
                key=lambda i: items[i][0].job_id,
            )
            if len(mine) == 1:  # one statement needs no transaction around it
                written[mine[0]] = self._repend_or_refused(name, items[mine[0]])
            elif mine:
                written.update(
                    zip(mine, self._fetch_each(name, [items[i] for i in mine]), strict=True)
                )
        return [written[i] for i in range(len(items))]

    def _repend_or_fallback(self, item: tuple[Claim, Settlement]) -> Outcome | Busy | None:
        """`_repend` with ``item``'s statement; when the database refuses one of its
        values (`retrying.refusal`), again with its `Settlement.fallback`: the same
        outcome, without what was refused."""
        claim, settlement = item
        name = SETTLE_FILES[settlement.action]
        try:
            return self._repend(name, settle_params(claim, settlement))
        except (StoreError, UnicodeError) as exc:
            refused = retrying.refusal(exc)
            if refused is None:
                raise
            return self._repend(name, settle_params(claim, settlement.fallback(refused)))

    def _repend_or_refused(self, name: str, item: tuple[Claim, Settlement]) -> Written:
        try:
            return self._repend_or_fallback(item)
        except StoreError as exc:
            if retrying.classify(exc) is not retrying.ErrorClass.STATEMENT:
                raise
            return exc

    def _fetch_each(self, name: str, items: list[tuple[Claim, Settlement]]) -> list[Written]:
        """Run statement ``name`` once for each of ``items`` in one transaction, each in
        a savepoint (see `settle_many`)."""
        query = sqlfiles.statement(name, self.prefix)
        with self.transaction() as conn:
            return [_run_saved(conn, name, query, item) for item in items]


def _run_saved(
    conn: psycopg.Connection[Any], name: str, query: bytes, item: tuple[Claim, Settlement]
) -> Written:
    """Run ``item``'s statement in a savepoint, and its `Settlement.fallback` in another
    when the database refuses one of its values."""
    claim, settlement = item

    def saved(params: dict[str, Any]) -> Callable[[], list[tuple[Any, ...]]]:
        def run() -> list[tuple[Any, ...]]:
            with conn.transaction():  # a savepoint: a refused statement undoes itself alone
                return run_statement(conn, query, params)

        return run

    try:
        try:
            return _while_key_taken(name, saved(settle_params(claim, settlement)))
        except (psycopg.Error, UnicodeError) as exc:
            refused = retrying.refusal(exc)
            if refused is None:
                raise
            fallback = settlement.fallback(refused)
            return _while_key_taken(name, saved(settle_params(claim, fallback)))
    except StoreUnavailable as taken:  # racing enqueues kept taking the dedup key
        return taken
    except psycopg.Error as exc:
        if retrying.classify(exc) is not retrying.ErrorClass.STATEMENT:
            raise
        refused_error = retrying.store_error(exc)
        refused_error.__cause__ = exc
        return refused_error
