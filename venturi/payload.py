"""Payload checks: a JSON object that PostgreSQL's jsonb stores and returns exactly."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from venturi.errors import InvalidPayload

DEFAULT_MAX_PAYLOAD_BYTES: Final = 1_048_576
MAX_DEPTH: Final = 64
# Ints within this bound print in far fewer digits than any int_max_str_digits allows
# (at least 640), so only larger ones are converted to text to check.
_PRINTABLE_INT: Final = 10**18


class _Refused(Exception):
    """A value refused somewhere inside a payload. The path to it is built only then, on
    the way out (each container adds its step), so a valid payload builds no path text."""

    def __init__(self, describe: Callable[[str], str]) -> None:
        super().__init__()
        self.describe = describe  # the message, given the value's path
        self.steps: list[str] = []  # from the value up to the root: ".key", "[0]"

    def message(self, root: str) -> str:
        return self.describe(root + "".join(reversed(self.steps)))


def _check(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Refused(lambda path: f"payload nests deeper than {MAX_DEPTH} levels at {path}")
    # Exact types first: the common case costs no ABC check and no conversion.
    kind = type(value)
    if kind is str:
        _check_text(value)
    elif kind is int:
        if not -_PRINTABLE_INT < value < _PRINTABLE_INT:
            _check_int(value)
    elif value is None or kind is bool:
        pass
    elif kind is float:
        _check_float(value)
    elif kind is dict or isinstance(value, Mapping):
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise _Refused(functools.partial(_key_not_str, key))
            try:
                _check_text(key)
            except _Refused as refused:
                refused.steps.append(" (key)")
                raise
            try:
                _check(item, depth + 1)
            except _Refused as refused:
                refused.steps.append(f".{key}")
                raise
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            try:
                _check(item, depth + 1)
            except _Refused as refused:
                refused.steps.append(f"[{index}]")
                raise
    elif isinstance(value, int):
        _check_int(value)
    elif isinstance(value, float):
        _check_float(value)
    elif isinstance(value, str):
        _check_text(value)
    else:
        raise _Refused(
            lambda path: (
                f"payload value at {path} is a {type(value).__name__}, which is not "
                "JSON-serialisable"
            )
        )


def _key_not_str(key: object, path: str) -> str:
    return f"payload key {key!r} at {path} is a {type(key).__name__}; JSON keys are str"


def _check_int(value: int) -> None:
    try:
        str(value)
    except ValueError:
        raise _Refused(
            lambda path: (
                f"payload holds an int at {path} with more digits than Python "
                f"converts to text (sys.get_int_max_str_digits() is {sys.get_int_max_str_digits()})"
            )
        ) from None


def _check_float(value: float) -> None:
    if not math.isfinite(value):
        raise _Refused(
            lambda path: f"payload holds {value!r} at {path}; JSON has no NaN or Infinity"
        )
    # jsonb keeps numbers as numeric, which has no negative zero and prints positionally:
    # a float whose shortest form needs an exponent of 16 or more (1e+16) has no decimal
    # point there and would come back as an int. Refuse both rather than change them.
    if value == 0 and math.copysign(1.0, value) < 0:
        raise _Refused(
            lambda path: (
                f"payload holds -0.0 at {path}; jsonb stores JSON numbers as numeric, "
                "which has no negative zero (pass 0.0)"
            )
        )
    if "e+" in repr(value):
        raise _Refused(
            lambda path: (
                f"payload holds the float {value!r} at {path}, which jsonb (storing "
                f"numbers as numeric) would return as the int {int(value)}; pass an int or a str"
            )
        )


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise _Refused(
            lambda path: f"payload text at {path} holds a NUL character, which jsonb refuses"
        )
    if text.isascii():  # ASCII holds no surrogate: nothing to encode
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused(
            lambda path: f"payload text at {path} is not valid Unicode (a lone surrogate?)"
        ) from None


def _compact_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``
    for a value `_check` accepted, built once.

    json.dumps with options builds a JSONEncoder, and that a C encoder object, on every
    call: half the cost of a small payload. This builds the same C encoder once, as
    `json.JSONEncoder.iterencode` would (no circular check: `_check` refuses any nesting
    deeper than MAX_DEPTH first). Where the C accelerator is missing, the public encoder.
    """
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    encode = make(
        None,  # markers: no circular check
        encoder.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # indent
        encoder.key_separator,
        encoder.item_separator,
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
    join = "".join

    def dumps(value: Any) -> str:
        if type(value) is str:  # the C encoder takes containers and numbers
            return encoder.encode(value)
        return join(encode(value, 0))

    return dumps


_dumps: Final = _compact_encoder()


def utf8_size(text: str) -> int:
    """The bytes ``text`` takes in UTF-8; ASCII text is measured without encoding it."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def encode_json(value: Any, field: str = "payload", *, max_bytes: int | None = None) -> str:
    """Check ``value`` and return its compact JSON text (for a ``::jsonb`` parameter)."""
    try:
        _check(value, 0)
    except _Refused as refused:
        raise InvalidPayload(refused.message(field)) from None
    text = _dumps(value)
    if max_bytes is not None:
        size = utf8_size(text)
        if size > max_bytes:
            raise InvalidPayload(f"{field} is {size} bytes of JSON; the limit is {max_bytes}")
    return text


def encode_payload(payload: object, *, max_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """Check that ``payload`` is a JSON object within ``max_bytes`` and return its text."""
    if type(payload) is not dict and not isinstance(payload, Mapping):
        raise InvalidPayload(
            f"payload must be a JSON object (a dict of keyword arguments), "
            f"got {type(payload).__name__}"
        )
    return encode_json(payload, "payload", max_bytes=max_bytes)
