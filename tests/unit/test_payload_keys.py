"""A payload's keys are checked against the handler's signature by two set comparisons
where that is exact, and the verdict is always `inspect.Signature.bind`'s."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from venturi.errors import InvalidJob
from venturi.registry import JobDefinition, PayloadKeys


def plain(a: int, b: int = 0) -> None: ...
def keyword_only(*, a: int, b: int = 0) -> None: ...
def with_kwargs(a: int, **rest: Any) -> None: ...
def with_args(a: int, *rest: Any, b: int) -> None: ...
def positional_only(a: int = 0, /, b: int = 0) -> None: ...
def positional_only_and_kwargs(a: int = 0, /, **rest: Any) -> None: ...
def nothing() -> None: ...


HANDLERS = [
    plain,
    keyword_only,
    with_kwargs,
    with_args,
    positional_only,
    positional_only_and_kwargs,
    nothing,
]
PAYLOADS: list[dict[str, Any]] = [
    {},
    {"a": 1},
    {"b": 2},
    {"a": 1, "b": 2},
    {"a": 1, "c": 3},
    {"c": 3},
    {"rest": 1},
    {"a": 1, "b": 2, "rest": 4},
]


def _binds(func: Callable[..., Any], payload: dict[str, Any]) -> bool:
    try:
        inspect.signature(func).bind(**payload)
    except TypeError:
        return False
    return True


@pytest.mark.parametrize("func", HANDLERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("payload", PAYLOADS, ids=str)
def test_the_check_agrees_with_signature_bind(
    func: Callable[..., Any], payload: dict[str, Any]
) -> None:
    definition = JobDefinition("k", func)
    if _binds(func, payload):
        definition.check_payload(payload)
    else:
        with pytest.raises(InvalidJob, match="does not fit"):
            definition.check_payload(payload)


@pytest.mark.parametrize("func", HANDLERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("payload", PAYLOADS, ids=str)
def test_keys_that_fit_always_bind(func: Callable[..., Any], payload: dict[str, Any]) -> None:
    keys = PayloadKeys.of(inspect.signature(func))
    if keys is not None and keys.fit(payload):
        assert _binds(func, payload)


def test_a_positional_only_parameter_leaves_the_decision_to_bind() -> None:
    assert PayloadKeys.of(inspect.signature(positional_only)) is None
    assert PayloadKeys.of(inspect.signature(plain)) == PayloadKeys(
        frozenset({"a", "b"}), frozenset({"a"}), takes_any=False
    )
