"""Pure helpers of the CLI: durations, DSN redaction, one-line errors (no database)."""

from __future__ import annotations

import pytest

from venturi.cli.render import summary
from venturi.cli.support import parse_duration
from venturi.errors import first_line
from venturi.store.dsn import redact_dsn, scrub


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("7d", 604800.0),
        ("1w", 604800.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5s", 1.5),
        ("45", 45.0),
        (" 2H ", 7200.0),
        ("0s", 0.0),
    ],
)
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5x", "s", "-5s", "5 m", "1h-30m", "nan", "inf", "-1", "m5"])
def test_bad_durations_are_refused_with_the_rule(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_redact_drops_the_password_from_uris_and_keyword_strings() -> None:
    uri = redact_dsn("postgresql://app:s3cret@db.example.com:6432/jobs?sslmode=require")
    words = redact_dsn("host=db port=5432 user=app password=s3cret dbname=jobs")
    for text in (uri, words):
        assert "s3cret" not in text
        assert "password" not in text
    assert "host=db.example.com" in uri and "sslmode=require" in uri
    assert "user=app" in words and "dbname=jobs" in words


def test_redact_never_echoes_an_unparseable_dsn() -> None:
    assert redact_dsn("host=db password=s3cret oops") == "<unparseable DSN>"


def test_scrub_masks_a_password_a_message_quotes() -> None:
    dsn = "postgresql://app:s3cret@db/jobs"
    assert scrub('bad token "s3cret" in URI', dsn) == 'bad token "***" in URI'
    assert scrub("nothing to hide", "host=db") == "nothing to hide"


def test_first_line_keeps_the_first_line_or_the_type() -> None:
    assert first_line(RuntimeError("first\nsecond")) == "first"
    assert first_line(KeyError()) == "KeyError"


@pytest.mark.parametrize(
    ("note", "line"),
    [
        (None, ""),
        ("  \n ", ""),
        ("done", "done"),
        ("first\nsecond", "first (+1 lines)"),
        (
            "Traceback (most recent call last):\n  File x\nValueError: bad",
            "ValueError: bad (+2 lines)",
        ),
    ],
)
def test_a_journal_note_shows_as_one_line(note: str | None, line: str) -> None:
    assert summary(note) == line


def test_scrub_hides_what_a_message_quotes_of_an_unparseable_dsn() -> None:
    dsn = "host=db password=s3cret oops"
    assert scrub('syntax error at "oops"', dsn) == 'syntax error at "…"'
    assert scrub('missing "=" after "x"', dsn) == 'missing "=" after "x"'
