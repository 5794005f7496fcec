"""Payload checks: a JSON object that PostgreSQL's jsonb stores and returns exactly."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any, Final

from venturi.errors import InvalidPayload

DEFAULT_MAX_PAYLOAD_BYTES: Final = 1_048_576
MAX_DEPTH: Final = 64


def _check(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InvalidPayload(f"payload nests deeper than {MAX_DEPTH} levels at {path}")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        _check_int(value, path)
        return
    if isinstance(value, float):
        _check_float(value, path)
        return
    if isinstance(value, str):
        _check_text(value, path)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidPayload(
                    f"payload key {key!r} at {path} is a {type(key).__name__}; JSON keys are str"
                )
            _check_text(key, f"{path} (key)")
            _check(item, f"{path}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)
        return
    raise InvalidPayload(
        f"payload value at {path} is a {type(value).__name__}, which is not JSON-serialisable"
    )


def _check_int(value: int, path: str) -> None:
    try:
        str(value)
    except ValueError:
        raise InvalidPayload(
            f"payload holds an int at {path} with more digits than Python converts to text "
            f"(sys.get_int_max_str_digits() is {sys.get_int_max_str_digits()})"
        ) from None


def _check_float(value: float, path: str) -> None:
    if not math.isfinite(value):
        raise InvalidPayload(f"payload holds {value!r} at {path}; JSON has no NaN or Infinity")
    # jsonb keeps numbers as numeric, which has no negative zero and prints positionally:
    # a float whose shortest form needs an exponent of 16 or more (1e+16) has no decimal
    # point there and would come back as an int. Refuse both rather than change them.
    if value == 0 and math.copysign(1.0, value) < 0:
        raise InvalidPayload(
            f"payload holds -0.0 at {path}; jsonb stores JSON numbers as numeric, which has "
            "no negative zero (pass 0.0)"
        )
    if "e+" in repr(value):
        raise InvalidPayload(
            f"payload holds the float {value!r} at {path}, which jsonb (storing numbers as "
            f"numeric) would return as the int {int(value)}; pass an int or a str"
        )


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise InvalidPayload(f"payload text at {path} holds a NUL character, which jsonb refuses")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidPayload(
            f"payload text at {path} is not valid Unicode (a lone surrogate?)"
        ) from exc


def encode_json(value: Any, field: str = "payload", *, max_bytes: int | None = None) -> str:
    """Check ``value`` and return its compact JSON text (for a ``::jsonb`` parameter)."""
    _check(value, field, 0)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if max_bytes is not None:
        size = len(text.encode("utf-8"))
        if size > max_bytes:
            raise InvalidPayload(f"{field} is {size} bytes of JSON; the limit is {max_bytes}")
    return text


def encode_payload(payload: object, *, max_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """Check that ``payload`` is a JSON object within ``max_bytes`` and return its text."""
    if not isinstance(payload, Mapping):
        raise InvalidPayload(
            f"payload must be a JSON object (a dict of keyword arguments), "
            f"got {type(payload).__name__}"
        )
    return encode_json(payload, "payload", max_bytes=max_bytes)
