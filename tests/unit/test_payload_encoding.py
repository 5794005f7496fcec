"""The payload's JSON text is exactly what json.dumps makes with venturi's options, and a
kind's payload keys are still checked against its handler on every enqueue."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from venturi.errors import InvalidJob, InvalidPayload
from venturi.payload import encode_json, encode_payload
from venturi.registry import JobDefinition

VALUES: list[Any] = [
    {},
    {"n": 1},
    {"a": [1, 2.5, "é✓", None, True, False, {"x": {}}], "b": (1, [2])},
    {"f": 1e15, "g": -2.5e-10, "big": 2**70, "neg": -(10**30)},
    {"text": 'quote " backslash \\ newline \n tab \t separator \u2028 emoji 🎉'},
    {"": "", "nested": {"deeper": [{"deepest": []}]}},
    [],
    [1, "two", 3.0],
    "a str",
    5,
    1.5,
    None,
    True,
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_text_is_compact_json_dumps(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert encode_json(value) == expected
    if isinstance(value, dict):
        assert encode_payload(value) == expected


def test_a_refused_value_names_its_path_however_deep() -> None:
    with pytest.raises(InvalidPayload, match=r"at payload\.a\[1\]\.b; JSON has no NaN"):
        encode_payload({"a": [0, {"b": math.nan}]})
    with pytest.raises(InvalidPayload, match=r"text at payload\.k \(key\) holds a NUL"):
        encode_payload({"k": {"bad\x00key": 1}})
    with pytest.raises(InvalidPayload, match=r"payload key 3 at payload\.m is a int"):
        encode_payload({"m": {3: "x"}})
    with pytest.raises(InvalidPayload, match=r"at carry\[2\]; JSON has no NaN"):
        encode_json([1, 2, math.inf], "carry")


def _definition() -> JobDefinition:
    def send(to: str, subject: str = "") -> None: ...

    return JobDefinition("mail", send)


def test_every_payload_is_checked_against_the_handler() -> None:
    definition = _definition()
    definition.check_payload({"to": "a"})
    definition.check_payload({"to": "b"})
    with pytest.raises(InvalidJob, match="missing required keys 'to'"):
        definition.check_payload({"subject": "s"})
    with pytest.raises(InvalidJob, match="unexpected keys 'cc'"):
        definition.check_payload({"to": "a", "cc": "b"})
    definition.check_payload({"subject": "s", "to": "a"})
    with pytest.raises(InvalidJob, match="unexpected keys 'cc'"):
        definition.check_payload({"to": "a", "cc": "b"})  # a refused shape stays refused
