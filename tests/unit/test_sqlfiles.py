"""Unit tests of the SQL files: each composes for a prefix, with no placeholder left over."""

from __future__ import annotations

import re
from importlib import resources

import attrs
import pytest
from psycopg import sql

from venturi.models import JobRecord
from venturi.prefix import MAX_PREFIX_LENGTH, Prefix
from venturi.store import sqlfiles

PREFIX = Prefix("p" * MAX_PREFIX_LENGTH)
LEFTOVER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
OPERATIONS = sqlfiles.operation_names()
MIGRATIONS = [f"migrations/{name}" for name in sqlfiles.migration_names()]


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def _strip_literals(text: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", text)


def test_the_files_are_found_through_importlib_resources() -> None:
    assert "claim" in OPERATIONS
    assert "settle" in OPERATIONS
    assert MIGRATIONS[0] == "migrations/0001_initial"
    assert resources.files("venturi.sql").joinpath("claim.sql").is_file()


@pytest.mark.parametrize("name", OPERATIONS + MIGRATIONS)
def test_every_file_composes_with_no_placeholder_left(name: str) -> None:
    composed = sqlfiles.query(name, PREFIX).as_string()
    leftover = LEFTOVER.findall(_strip_comments(composed))
    assert not leftover, f"{name}.sql keeps placeholders {leftover}"


@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_is_ascii_so_its_composed_bytes_suit_any_client_encoding(
    name: str,
) -> None:
    text = sqlfiles.text(name)
    assert text.isascii(), (
        f"{name}.sql holds non-ASCII text: {set(text) - set(map(chr, range(128)))}"
    )
    statement = sqlfiles.statement(name, PREFIX)
    assert statement == sqlfiles.query(name, PREFIX).as_string().encode("ascii")
    assert sqlfiles.statement(name, PREFIX) is statement, "composed once"


@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_file_has_a_header_and_one_statement(name: str) -> None:
    text = sqlfiles.text(name)
    header = [line for line in text.splitlines() if line.startswith("--")]
    assert len(header) >= 2, f"{name}.sql needs a header: what, parameters, returns"
    joined = " ".join(header)
    assert "Parameters" in joined, f"{name}.sql header does not list its parameters"
    assert "Returns" in joined, f"{name}.sql header does not say what it returns"
    body = _strip_literals(_strip_comments(text)).strip()
    assert ";" not in body, f"{name}.sql holds more than one statement"


@pytest.mark.parametrize("name", OPERATIONS)
def test_values_travel_as_named_parameters(name: str) -> None:
    body = _strip_comments(sqlfiles.text(name))
    assert not re.search(r"%s\b", body), f"{name}.sql uses a positional %s parameter"


def test_the_migration_keeps_its_literal_braces() -> None:
    composed = sqlfiles.query("migrations/0001_initial", PREFIX).as_string()
    assert "'{}'::jsonb" in composed


def test_names_are_quoted_identifiers_and_the_channel_a_literal() -> None:
    composed = sqlfiles.query("enqueue", PREFIX).as_string()
    assert f'"{PREFIX.jobs}"' in composed
    assert f"pg_notify('{PREFIX.channel}'" in composed


def test_an_unknown_placeholder_fails_to_compose() -> None:
    with pytest.raises(KeyError):
        sql.SQL("SELECT * FROM {jobz}").format(**PREFIX.placeholders())


def test_files_are_loaded_once() -> None:
    assert sqlfiles.text("claim") is sqlfiles.text("claim")
    assert sqlfiles.statement("claim", PREFIX) is sqlfiles.statement("claim", PREFIX)


FRAGMENTS = sorted(sqlfiles.fragments())


def test_the_fragments_are_found_and_stripped_of_their_headers() -> None:
    assert {"job_columns", "held_by_run", "locked_runs", "busy_runs", "new_job"} <= set(FRAGMENTS)
    for name, piece in sqlfiles.fragments().items():
        assert piece and not piece.startswith("--"), f"fragments/{name}.sql is empty"


def test_fragment_names_do_not_shadow_the_prefix_names() -> None:
    assert not set(FRAGMENTS) & set(PREFIX.placeholders())


@pytest.mark.parametrize("name", FRAGMENTS)
def test_every_fragment_is_used_by_an_operation(name: str) -> None:
    users = [op for op in OPERATIONS if f"{{{name}}}" in sqlfiles.source(op)]
    pieces = sqlfiles.fragments()  # bodies only: a header's mention is no use
    users += [f for f in FRAGMENTS if f != name and f"{{{name}}}" in pieces[f]]
    assert users, f"fragments/{name}.sql is used nowhere"


def test_fragments_are_pasted_in_with_the_indent_of_their_line() -> None:
    text = sqlfiles.text("get")
    assert "{job_columns}" in sqlfiles.source("get") and "{job_columns}" not in text
    assert "max_attempts, carry, dedup_key, claimed_by, claim_expires_at, finished_at" in text
    nested = sqlfiles.text("extend_lease")  # {locked_runs} names {held_by_run}
    assert "{held_by_run}" not in nested and "j.run_count = b.run" in nested


def test_the_job_columns_match_the_record() -> None:
    columns = [c.strip() for c in sqlfiles.fragments()["job_columns"].split(",")]
    # ``durable`` is read beside the row (`Queue.get`), never a column of it.
    assert columns == [f for f in attrs.fields_dict(JobRecord) if f != "durable"]


def test_a_migration_never_names_a_fragment() -> None:
    # An applied migration must not change when a fragment does, so the loader leaves
    # migrations alone and a fragment's name there fails to compose.
    for name in MIGRATIONS:
        assert not any(f"{{{f}}}" in sqlfiles.source(name) for f in FRAGMENTS), name


def test_a_misspelt_fragment_fails_to_compose(monkeypatch: pytest.MonkeyPatch) -> None:
    sqlfiles.text.cache_clear()
    monkeypatch.setattr(sqlfiles, "_read", lambda name: "SELECT {job_colums} FROM {jobs}")
    try:
        with pytest.raises(KeyError, match="job_colums"):
            sql.SQL(sqlfiles.text("get")).format(**PREFIX.placeholders())
    finally:
        sqlfiles.text.cache_clear()


def test_a_cycle_of_fragments_is_refused() -> None:
    with pytest.raises(ValueError, match="nest deeper"):
        sqlfiles._expand("{a}", {"a": "x {b}", "b": "{a}"})
