"""Unit tests of the table-name prefix: the naming rule, derived names and the lock key."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from venturi.errors import InvalidPrefix, VenturiError
from venturi.prefix import LONGEST_SUFFIX, MAX_PREFIX_LENGTH, Prefix

VALID = ["a", "venturi", "app_1", "q9", "a_b_c_", "x" * MAX_PREFIX_LENGTH]

INVALID = [
    "",
    "Venturi",  # uppercase
    "1queue",  # digit first
    "_queue",  # underscore first
    "my-queue",  # hyphen
    "my queue",  # space
    "queue\n",  # trailing newline ($ in a re.match would let this through)
    "\nqueue",
    "qu\x00eue",
    "qu\u0435ue",  # Cyrillic ie (U+0435), a look-alike of e
    "\uff51ueue",  # full-width q (U+FF51)
    "\u017ftate",  # long s (U+017F), which folds to s under IGNORECASE
    "queue;drop",
    'a"b',
]


@pytest.mark.parametrize("name", VALID)
def test_valid_prefixes_are_accepted(name: str) -> None:
    assert Prefix(name).name == name


@pytest.mark.parametrize("name", INVALID)
def test_invalid_prefixes_are_refused_naming_the_rule(name: str) -> None:
    with pytest.raises(InvalidPrefix, match=r"\^\[a-z\]\[a-z0-9_\]\*\$") as info:
        Prefix(name)
    assert isinstance(info.value, VenturiError)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [None, b"venturi", 7, ["venturi"]])
def test_a_prefix_must_be_a_str(value: object) -> None:
    with pytest.raises(InvalidPrefix, match="prefix must be a str"):
        Prefix(value)  # type: ignore[arg-type]


def test_a_prefix_one_character_too_long_is_refused_naming_the_limit() -> None:
    name = "x" * (MAX_PREFIX_LENGTH + 1)
    with pytest.raises(InvalidPrefix) as info:
        Prefix(name)
    message = str(info.value)
    assert f"at most {MAX_PREFIX_LENGTH}" in message
    assert "63-byte" in message


def test_the_limit_leaves_room_for_the_longest_suffix() -> None:
    assert MAX_PREFIX_LENGTH + LONGEST_SUFFIX == 63


def test_every_derived_name_of_the_longest_prefix_fits_63_bytes() -> None:
    prefix = Prefix("x" * MAX_PREFIX_LENGTH)
    names = [prefix.table(key) for key in prefix.placeholders() if key in _table_keys()]
    assert names, "no derived names?"
    assert max(len(n.encode()) for n in names) == 63
    assert len(prefix.channel.encode()) <= 63
    assert len(prefix.done_channel.encode()) <= 63


def _table_keys() -> set[str]:
    channels = {"channel", "channel_ident", "done_channel", "done_channel_ident"}
    return set(Prefix("a").placeholders()) - channels


def test_derived_names() -> None:
    prefix = Prefix("shop")
    assert prefix.jobs == "shop_jobs"
    assert prefix.journal == "shop_journal"
    assert prefix.table("schema_history") == "shop_schema_history"
    assert prefix.channel == "shop_jobs"
    assert str(prefix) == "shop"


def test_placeholders_are_a_closed_set_of_identifiers_and_the_channel_literal() -> None:
    placeholders = Prefix("shop").placeholders()
    assert {"jobs", "journal", "schema_history", "channel", "channel_ident"} <= set(placeholders)
    assert placeholders["jobs"].as_string() == '"shop_jobs"'
    assert placeholders["channel"].as_string() == "'shop_jobs'"
    with pytest.raises(KeyError):
        Prefix("shop").table("nonexistent")


def test_lock_key_is_a_stable_content_hash() -> None:
    expected = int.from_bytes(
        hashlib.blake2b(b"venturi-migrate:shop", digest_size=8).digest(), "big", signed=True
    )
    assert Prefix("shop").lock_key == expected
    assert -(2**63) <= expected < 2**63


def test_lock_key_is_the_same_in_another_interpreter_with_another_hash_seed() -> None:
    code = "from venturi.prefix import Prefix; print(Prefix('shop').lock_key)"
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert keys == {str(Prefix("shop").lock_key)}


def test_lock_keys_differ_between_prefixes() -> None:
    keys = {Prefix(f"q{i}").lock_key for i in range(1000)}
    assert len(keys) == 1000


def test_prefixes_are_values() -> None:
    assert Prefix("shop") == Prefix("shop")
    assert hash(Prefix("shop")) == hash(Prefix("shop"))
    with pytest.raises(AttributeError):
        Prefix("shop").name = "other"  # type: ignore[misc]
