"""What a handler hands back, made storable: note text (`storable_text`) and the fallback
of a settlement the database refused (`Settlement.fallback`). Pure logic; the database's
side is in tests/worker/test_hostile_settlements.py and tests/store/test_hostile_values.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from venturi.durations import MAX_DELAY_SECONDS
from venturi.errors import InvalidJob
from venturi.settlements import KEEP, MAX_NOTE_CHARS, SettleAction, Settlement, storable_text


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("a\x00b", "a\\x00b"),
        ("a\ud800b\udfff", "a\ufffdb\ufffd"),
        ("\ud83d\ude00", "\ufffd\ufffd"),  # a pair of lone surrogates is no character
        ("naïve 😀", "naïve 😀"),
    ],
)
def test_text_is_made_storable_and_kept_otherwise(text: str, stored: str) -> None:
    assert storable_text(text) == stored
    storable_text(text).encode("utf-8")


@pytest.mark.parametrize("text", ["y" * (5 << 20), "\x00" * MAX_NOTE_CHARS, "é" * 20_000])
def test_long_text_is_cut_saying_how_long_it_was(text: str) -> None:
    cut = storable_text(text)
    assert len(cut) <= MAX_NOTE_CHARS
    assert cut.endswith(f"(cut: {len(text)} characters)")


def test_a_settlement_note_is_storable_however_it_is_built() -> None:
    assert Settlement.dead("x\x00").note == "x\\x00"
    assert Settlement(SettleAction.RETRY, delay=0.0, note="\ud800").note == "\ufffd"


@pytest.mark.parametrize(
    "build",
    [
        lambda: Settlement.retry(MAX_DELAY_SECONDS + 1),
        lambda: Settlement.pause(delay=10**12),
    ],
)
def test_settlement_delays_are_bounded(build: object) -> None:
    with pytest.raises(InvalidJob, match=f"more than {MAX_DELAY_SECONDS}s"):
        build()  # type: ignore[operator]


def test_a_completions_fallback_keeps_the_outcome_and_drops_the_result() -> None:
    settlement = Settlement.complete(attachment={"big": 1}, note="déjà")
    fallback = settlement.fallback("22P05: untranslatable")
    assert (fallback.action, fallback.attachment, fallback.carry) == (
        SettleAction.COMPLETE,
        None,
        KEEP,
    )
    assert fallback.note is not None and fallback.note.isascii()
    assert "22P05: untranslatable" in fallback.note and "the result" in fallback.note
    assert fallback.note.endswith("d\\xe9j\\xe0")


def test_a_retrys_fallback_clamps_its_delay_and_keeps_the_carry() -> None:
    settlement = Settlement(SettleAction.RETRY, delay=1e16, carry={"step": 2}, note="far")
    fallback = settlement.fallback("22008: timestamp out of range")
    assert (fallback.action, fallback.delay, fallback.carry) == (
        SettleAction.RETRY,
        float(MAX_DELAY_SECONDS),
        KEEP,
    )
    assert fallback.note is not None and "the carry" in fallback.note
    assert f"beyond {MAX_DELAY_SECONDS}s" in fallback.note and fallback.note.endswith("far")


def test_a_pauses_fallback_keeps_a_time_it_can_store() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    fallback = Settlement.pause(at=at, note="later").fallback("54000: too large")
    assert (fallback.action, fallback.at, fallback.delay) == (SettleAction.PAUSE, at, None)


def test_a_fallback_of_a_long_note_stays_within_the_limit() -> None:
    fallback = Settlement.dead("é" * MAX_NOTE_CHARS).fallback("22P05: untranslatable")
    assert fallback.note is not None and len(fallback.note) <= MAX_NOTE_CHARS
    assert fallback.note.isascii()
