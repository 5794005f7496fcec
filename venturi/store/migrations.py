"""Forward-only, numbered migrations applied under a per-prefix advisory lock."""

from __future__ import annotations

import logging
import math
from typing import Any, Final

import psycopg
from psycopg import errors, sql

from venturi.errors import MigrationLockTimeout, SchemaError
from venturi.prefix import Prefix
from venturi.store import sqlfiles

logger = logging.getLogger("venturi.store")


def known_migrations() -> list[tuple[int, str]]:
    """(version, name) of every migration this code ships, in order."""
    return [(int(name.split("_", 1)[0]), name) for name in sqlfiles.migration_names()]


def latest_version() -> int:
    return known_migrations()[-1][0]


# How long `migrate` waits for another session's migration of the same prefix.
DEFAULT_LOCK_TIMEOUT: Final = 60.0


def migrate(conn: psycopg.Connection[Any], prefix: Prefix, lock_timeout: float) -> list[str]:
    """Apply every missing migration in one transaction; return the names applied.

    Concurrent callers for the same prefix queue on its advisory lock (at most
    ``lock_timeout`` seconds, then `MigrationLockTimeout`); other prefixes never wait.
    """
    applied_now: list[str] = []
    try:
        with conn.transaction():
            conn.execute(
                sqlfiles.statement("migration_lock", prefix),
                {"key": prefix.lock_key, "timeout": lock_timeout_text(lock_timeout)},
            )
            conn.execute(sqlfiles.statement("migration_history_create", prefix))
            rows = conn.execute(sqlfiles.statement("migration_versions", prefix)).fetchall()
            applied = {int(row[0]) for row in rows}
            _refuse_newer(prefix, applied)
            for version, name in known_migrations():
                if version in applied:
                    continue
                conn.execute(sqlfiles.statement(f"migrations/{name}", prefix))
                conn.execute(
                    sqlfiles.statement("migration_record", prefix),
                    {"version": version, "name": name},
                )
                applied_now.append(name)
    except errors.LockNotAvailable as exc:
        raise MigrationLockTimeout(
            f"another session held the migration lock of prefix {prefix.name!r} for more "
            f"than {lock_timeout:g}s; is a migration stuck? (advisory lock key "
            f"{prefix.lock_key})"
        ) from exc
    if applied_now:
        logger.info("prefix %s migrated: %s", prefix.name, ", ".join(applied_now))
    return applied_now


def lock_timeout_text(seconds: float) -> str:
    """``seconds`` as a lock_timeout setting's value, in whole milliseconds."""
    # At least 1ms: PostgreSQL reads lock_timeout = 0 as "wait forever".
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def schema_script(
    prefix: Prefix,
    after: int = 0,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    made_by: str = "venturi",
) -> str:
    """The DDL of every migration later than ``after`` for ``prefix``, as one transaction
    that takes the same advisory lock and records the same history as `migrate`, for
    teams that apply DDL themselves. ``made_by`` names the tool in the first comment."""
    wanted = [(v, name) for v, name in known_migrations() if v > after]
    parts = [
        f"-- {made_by}: schema of prefix {prefix.name!r}, "
        f"migrations {', '.join(n for _, n in wanted) or '(none)'}.",
        "-- Apply in one go, e.g. psql -v ON_ERROR_STOP=1 -f schema.sql; `venturi migrate`",
        "-- then finds these migrations applied.",
        "BEGIN;",
        _script_statement(
            "migration_lock", prefix, timeout=lock_timeout_text(lock_timeout), key=prefix.lock_key
        ),
        _script_statement("migration_history_create", prefix),
    ]
    for version, name in wanted:
        parts.append(f"\n-- migration {name}")
        parts.append(_script_statement(f"migrations/{name}", prefix))
        parts.append(_script_statement("migration_record", prefix, version=version, name=name))
    parts.append("COMMIT;")
    return "\n".join(parts) + "\n"


def _script_statement(file: str, prefix: Prefix, **values: Any) -> str:
    """A SQL file composed for ``prefix``, its parameters written in as SQL literals."""
    text = sqlfiles.query(file, prefix).as_string(None)
    if values:
        # Only the lock and record statements take parameters, and neither holds another
        # `%`; this is the client-side binding psycopg itself would do.
        text = text % {key: sql.Literal(value).as_string(None) for key, value in values.items()}
    text = text.strip()
    return text if text.endswith(";") else text + ";"


def check(conn: psycopg.Connection[Any], prefix: Prefix) -> None:
    """Raise `SchemaError` unless the prefix's schema is exactly what this code expects."""
    table = prefix.table("schema_history")
    exists = conn.execute(sqlfiles.statement("schema_exists", prefix), {"table": table}).fetchone()
    if not exists or not exists[0]:
        raise SchemaError(
            f"prefix {prefix.name!r} has no venturi schema in this database; "
            "run queue.migrate() or `venturi migrate` first"
        )
    rows = conn.execute(sqlfiles.statement("migration_versions", prefix)).fetchall()
    applied = {int(row[0]) for row in rows}
    _refuse_newer(prefix, applied)
    missing = [name for version, name in known_migrations() if version not in applied]
    if missing:
        raise SchemaError(
            f"prefix {prefix.name!r} lacks migrations {', '.join(missing)}; "
            "run queue.migrate() or `venturi migrate`"
        )


def _refuse_newer(prefix: Prefix, applied: set[int]) -> None:
    newest = max(applied, default=0)
    if newest > latest_version():
        raise SchemaError(
            f"prefix {prefix.name!r} is at schema version {newest}, newer than this venturi "
            f"knows (up to {latest_version()}); upgrade venturi before running it here"
        )
