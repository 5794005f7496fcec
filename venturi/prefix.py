"""The table-name prefix: validation and every name derived from it."""

from __future__ import annotations

import hashlib
import re
from typing import Final

import attrs
from psycopg import sql

from venturi.errors import InvalidPrefix

_PATTERN: Final = re.compile(r"[a-z][a-z0-9_]*", re.ASCII)
_IDENTIFIER_LIMIT: Final = 63

# Every object venturi creates (tables, indexes, constraints, functions, domains), by
# placeholder name -> suffix appended to the prefix.
# Constraints are named explicitly so PostgreSQL never derives a longer name.
_SUFFIXES: Final = {
    "jobs": "_jobs",
    "journal": "_journal",
    "schema_history": "_schema_history",
    "jobs_pkey": "_jobs_pkey",
    "jobs_status_check": "_jobs_status_ck",
    "journal_pkey": "_journal_pkey",
    "journal_job_fkey": "_journal_job_fk",
    "journal_outcome_check": "_journal_out_ck",
    "schema_history_pkey": "_schema_hist_pkey",
    "claim_idx": "_jobs_claim_idx",
    "stale_idx": "_jobs_stale_idx",
    "history_idx": "_jobs_hist_idx",
    "finished_idx": "_jobs_fin_idx",
    "dedup_idx": "_jobs_dedup_idx",
    "journal_job_idx": "_journal_job_idx",
    "journal_id_seq": "_journal_id_seq",
    "kinds": "_kinds",
    "kinds_pkey": "_kinds_pkey",
    "kinds_limits_check": "_kinds_limits_ck",
    "key_claim_idx": "_jobs_key_idx",
    "key_running_idx": "_jobs_keyrun_idx",
    "schedules": "_schedules",
    "schedules_pkey": "_schedules_pkey",
    "deps": "_deps",
    "deps_pkey": "_deps_pkey",
    "deps_child_idx": "_deps_child_idx",
    "deps_parent_fkey": "_deps_parent_fk",
    "deps_child_fkey": "_deps_child_fk",
    "workflow_idx": "_jobs_wf_idx",
    "finish_children": "_finish_children",
    "workers": "_workers",
    "workers_pkey": "_workers_pkey",
    "jobs_kind_status_stats": "_jobs_ks_stats",
    "job_status": "_job_status",
    "job_status_values": "_job_status_ck",
    "parent_failure": "_parent_failure",
    "parent_failure_values": "_parent_fail_ck",
    "journal_outcome": "_journal_outcome",
    "journal_outcome_values": "_outcome_ck",
    "jobs_finished_check": "_jobs_fin_ck",
    "steps": "_steps",
    "steps_pkey": "_steps_pkey",
    "steps_seq_key": "_steps_seq_key",
    "steps_job_fkey": "_steps_job_fk",
    "signals": "_signals",
    "signals_pkey": "_signals_pkey",
    "signals_id_seq": "_signals_id_seq",
    "signals_job_fkey": "_signals_job_fk",
    "signals_job_idx": "_signals_job_idx",
    "waits": "_waits",
    "waits_pkey": "_waits_pkey",
    "waits_job_fkey": "_waits_job_fk",
    "fair_weights": "_fair_weights",
    "fair_weights_pkey": "_fair_w_pkey",
    "fair_weights_check": "_fair_w_ck",
    "fair_claim_idx": "_jobs_fair_idx",
    "fair_key_idx": "_jobs_fairkey_idx",
    "pended_idx": "_jobs_pended_idx",
    "pended_stamp": "_pended_stamp",
    "pended_on_insert": "_pended_ins",
    "pended_on_update": "_pended_upd",
    "fair_tag_of": "_fair_tag",
}
LONGEST_SUFFIX: Final = max(len(s) for s in _SUFFIXES.values())
MAX_PREFIX_LENGTH: Final = _IDENTIFIER_LIMIT - LONGEST_SUFFIX


def _validate(_instance: object, _attribute: object, value: str) -> None:
    if not isinstance(value, str):
        raise InvalidPrefix(f"prefix must be a str, got {type(value).__name__}")
    if not _PATTERN.fullmatch(value):
        raise InvalidPrefix(
            f"prefix {value!r} must match ^[a-z][a-z0-9_]*$ "
            "(ASCII lowercase letter first, then lowercase letters, digits or underscores)"
        )
    if len(value) > MAX_PREFIX_LENGTH:
        raise InvalidPrefix(
            f"prefix {value!r} is {len(value)} characters; at most {MAX_PREFIX_LENGTH} fit, "
            f"since prefix + the longest suffix ({LONGEST_SUFFIX}) must stay within "
            f"PostgreSQL's {_IDENTIFIER_LIMIT}-byte identifier limit"
        )


@attrs.frozen
class Prefix:
    """A validated prefix and the names of the tables, indexes and channel under it."""

    name: str = attrs.field(validator=_validate)

    def __str__(self) -> str:
        return self.name

    def table(self, placeholder: str) -> str:
        """The full object name for a placeholder such as ``jobs`` or ``claim_idx``."""
        return self.name + _SUFFIXES[placeholder]

    @property
    def jobs(self) -> str:
        return self.table("jobs")

    @property
    def journal(self) -> str:
        return self.table("journal")

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel; the same name as the jobs table."""
        return self.jobs

    @property
    def done_channel(self) -> str:
        """The channel a transaction that finishes awaited jobs notifies once (waiters
        listen)."""
        return self.name + "_done"

    @property
    def lock_key(self) -> int:
        """A stable signed 64-bit advisory-lock key derived from the prefix's content."""
        digest = hashlib.blake2b(b"venturi-migrate:" + self.name.encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big", signed=True)

    @property
    def prune_lock_key(self) -> int:
        """The advisory-lock key that lets one session at a time prune the prefix's jobs."""
        digest = hashlib.blake2b(b"venturi-prune:" + self.name.encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big", signed=True)

    def placeholders(self) -> dict[str, sql.Composable]:
        """The closed set of names a SQL file may use, ready for `sql.SQL.format`."""
        names: dict[str, sql.Composable] = {
            key: sql.Identifier(self.name + suffix) for key, suffix in _SUFFIXES.items()
        }
        names["channel"] = sql.Literal(self.channel)
        names["channel_ident"] = sql.Identifier(self.channel)
        names["done_channel"] = sql.Literal(self.done_channel)
        names["done_channel_ident"] = sql.Identifier(self.done_channel)
        return names
