"""Job registration: a kind, its handler and its policies."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Generic, ParamSpec, Protocol, TypedDict, TypeVar

import attrs
import psycopg
from ulid import ULID

from venturi.backoff import Backoff, Exponential
from venturi.durations import Duration, to_seconds
from venturi.errors import ConfigurationError, InvalidJob
from venturi.flow.limits import (
    KindLimits,
    Rate,
    to_concurrency,
    to_fair,
    to_key_concurrency,
    to_rate,
)
from venturi.models import validate_kind, validate_max_attempts, validate_priority

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_LEASE = 60.0
# The largest JSON a run may leave as its result (or carry), by default: the size a payload
# may have (`DEFAULT_MAX_PAYLOAD_BYTES`), since each is a jsonb value that every read of the
# job's journal (its page in the dashboard, `venturi job`) carries whole.
DEFAULT_MAX_RESULT_BYTES = 1_048_576

TransactionSource = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
"""Opens the transaction a transactional run happens in: a context manager yielding a
psycopg connection in an open transaction, which commits when the block ends normally
and rolls back when it raises (the Django integration's is ``transaction.atomic()``)."""


class JobOptions(TypedDict, total=False):
    """A kind's policies, as every ``job`` decorator takes them (see `Queue.job`)."""

    max_attempts: int
    backoff: Backoff
    priority: int
    lease: Duration
    timeout: Duration | None
    context: bool
    concurrency: int | None
    key_concurrency: int | None
    rate: str | Rate | None
    fair: bool
    transactional: bool
    transaction: TransactionSource | None
    max_result_bytes: int


class EnqueueTarget(Protocol):
    """Where a registered handler's ``enqueue`` sends jobs (the `Queue`)."""

    def enqueue(
        self, kind: str, payload: Mapping[str, Any] | None = None, **options: Any
    ) -> ULID: ...


def _positive_seconds(value: Duration, field: str) -> float:
    try:
        return to_seconds(value, field, allow_zero=False)
    except InvalidJob as exc:
        raise ConfigurationError(str(exc)) from None


def _lease(value: Duration) -> float:
    return _positive_seconds(value, "lease")


def _optional_timeout(value: Duration | None) -> float | None:
    return None if value is None else _positive_seconds(value, "timeout")


def _payload_signature(definition: JobDefinition) -> inspect.Signature:
    """The handler's signature as payloads must fit it (less a context parameter)."""
    if not callable(definition.func):
        raise ConfigurationError(f"handler of {definition.kind!r} is not callable")
    if not callable(definition.backoff):
        raise ConfigurationError(f"backoff of {definition.kind!r} must be callable")
    signature = inspect.signature(definition.func)
    if definition.context:
        params = list(signature.parameters.values())
        if not params or params[0].kind not in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            raise ConfigurationError(
                f"handler of {definition.kind!r} has context=True, so its first parameter "
                "must take the JobContext positionally"
            )
        signature = signature.replace(parameters=params[1:])
    unfillable = [
        p.name
        for p in signature.parameters.values()
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is inspect.Parameter.empty
    ]
    if unfillable:
        raise ConfigurationError(
            f"handler of {definition.kind!r} has required positional-only parameters "
            f"({', '.join(unfillable)}); payload keys arrive as keyword arguments"
        )
    return signature


def _payload_keys(definition: JobDefinition) -> PayloadKeys | None:
    return PayloadKeys.of(definition.signature)


@attrs.frozen
class JobDefinition:
    """How one kind runs: its handler, attempts, backoff, priority, lease and timeout."""

    kind: str = attrs.field(converter=validate_kind)
    func: Callable[..., Any]
    max_attempts: int = attrs.field(default=5, converter=validate_max_attempts)
    backoff: Backoff = attrs.field(factory=Exponential)
    priority: int = attrs.field(default=0, converter=validate_priority)
    lease: float = attrs.field(default=DEFAULT_LEASE, converter=_lease)
    timeout: float | None = attrs.field(default=None, converter=_optional_timeout)
    context: bool = False
    concurrency: int | None = attrs.field(default=None, converter=to_concurrency)
    key_concurrency: int | None = attrs.field(default=None, converter=to_key_concurrency)
    rate: Rate | None = attrs.field(default=None, converter=to_rate)
    # Claim the kind's due jobs in turn across their concurrency keys.
    fair: bool = attrs.field(default=False, converter=to_fair)
    # Run the handler in a transaction (``ctx.conn``) that the completion commits.
    transactional: bool = attrs.field(default=False, kw_only=True)
    # Where that transaction comes from; None: a connection of the worker's own.
    transaction: TransactionSource | None = attrs.field(default=None, kw_only=True)
    # A result (or carry) larger than this, as JSON, is not kept: the run is dead.
    max_result_bytes: int = attrs.field(default=DEFAULT_MAX_RESULT_BYTES, kw_only=True)
    signature: inspect.Signature = attrs.field(
        init=False, default=attrs.Factory(_payload_signature, takes_self=True)
    )
    _keys: PayloadKeys | None = attrs.field(
        init=False, default=attrs.Factory(_payload_keys, takes_self=True)
    )

    @transactional.validator
    def _check_transactional(self, _: attrs.Attribute[bool], value: bool) -> None:
        if not isinstance(value, bool):
            raise ConfigurationError(
                f"transactional of {self.kind!r} must be True or False, got {value!r}"
            )

    @max_result_bytes.validator
    def _check_max_result_bytes(self, _: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"max_result_bytes of {self.kind!r} must be a positive int, got {value!r}"
            )

    @transaction.validator
    def _check_transaction(
        self, _: attrs.Attribute[TransactionSource | None], value: TransactionSource | None
    ) -> None:
        if value is not None and not callable(value):
            raise ConfigurationError(f"transaction of {self.kind!r} must be callable")
        if value is not None and not self.transactional:
            raise ConfigurationError(
                f"transaction of {self.kind!r} is given, so the kind needs transactional=True"
            )

    @property
    def limits(self) -> KindLimits:
        """The flow limits a worker running this kind declares."""
        return KindLimits(self.kind, self.concurrency, self.key_concurrency, self.rate, self.fair)

    def check_concurrency_key(self, key: str | None) -> None:
        """Raise `InvalidJob` unless a key is given exactly when the kind limits keys, or
        is given or not for a fair kind (its jobs without a key share one turn)."""
        if self.key_concurrency is not None and key is None:
            raise InvalidJob(
                f"kind {self.kind!r} has key_concurrency={self.key_concurrency}, so every "
                "job of it needs a concurrency_key"
            )
        if self.key_concurrency is None and not self.fair and key is not None:
            raise InvalidJob(
                f"concurrency_key given, but kind {self.kind!r} has no key_concurrency and "
                "is not fair (declare either in the kind's job decorator)"
            )

    def check_payload(self, payload: Mapping[str, Any]) -> None:
        """Raise `InvalidJob` if the payload's keys do not fit the handler's parameters."""
        if self._keys is not None and self._keys.fit(payload):
            return  # what `Signature.bind` would accept, decided by two set comparisons
        try:
            self.signature.bind(**payload)
        except TypeError as exc:
            name = getattr(self.func, "__qualname__", repr(self.func))
            problems = "; ".join(_payload_problems(self.signature, payload)) or str(exc)
            raise InvalidJob(
                f"payload for {self.kind!r} does not fit {name}{self.signature}: {problems}"
            ) from None


@attrs.frozen
class PayloadKeys:
    """The payload keys a handler takes, for signatures whose parameters are all keyword
    parameters (or ``*args``, ``**kwargs``): there a payload fits exactly when it names
    every required one and nothing else (anything, with ``**kwargs``)."""

    names: frozenset[str]
    required: frozenset[str]
    takes_any: bool

    @classmethod
    def of(cls, signature: inspect.Signature) -> PayloadKeys | None:
        """The keys of ``signature``; None when it has a positional-only parameter."""
        params = signature.parameters.values()
        if any(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in params):
            return None
        keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        named = [p for p in params if p.kind in keyword_kinds]
        return cls(
            frozenset(p.name for p in named),
            frozenset(p.name for p in named if p.default is inspect.Parameter.empty),
            any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params),
        )

    def fit(self, payload: Mapping[str, Any]) -> bool:
        keys = payload.keys()
        return self.required <= keys and (self.takes_any or keys <= self.names)


def _payload_problems(signature: inspect.Signature, payload: Mapping[str, Any]) -> list[str]:
    """Every key the handler cannot take and every required argument left out."""
    params = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    unexpected = [
        key
        for key in payload
        if (key in params and params[key].kind not in keyword_kinds)
        or (key not in params and not takes_any)
    ]
    missing = [
        p.name
        for p in params.values()
        if p.kind in keyword_kinds
        and p.default is inspect.Parameter.empty
        and p.name not in payload
    ]
    problems = []
    if unexpected:
        problems.append(f"unexpected keys {', '.join(map(repr, unexpected))}")
    if missing:
        problems.append(f"missing required keys {', '.join(map(repr, missing))}")
    return problems


class JobFunction(Generic[P, R]):
    """A registered handler: still callable as the plain function, plus ``enqueue``."""

    def __init__(
        self, queue: EnqueueTarget, definition: JobDefinition, func: Callable[P, R]
    ) -> None:
        self.queue = queue
        self.definition = definition
        self.func = func
        self.__name__ = getattr(func, "__name__", definition.kind)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    @property
    def kind(self) -> str:
        return self.definition.kind

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def enqueue(self, **kwargs: Any) -> ULID:
        """Enqueue a run with these keyword arguments as the payload.

        ``concurrency_key=`` is taken as the job's key (for a kind with
        ``key_concurrency``), unless the handler has a parameter of that name: then it is
        payload, and the key goes through `enqueue_with`.
        """
        options = {}
        if (
            "concurrency_key" in kwargs
            and "concurrency_key" not in self.definition.signature.parameters
        ):
            options["concurrency_key"] = kwargs.pop("concurrency_key")
        return self.queue.enqueue(self.definition.kind, kwargs, **options)

    def enqueue_and_wait(self, timeout: Duration = 30.0, **kwargs: Any) -> Any:
        """Enqueue like `enqueue` and return the handler's return value once the job has
        completed (`Queue.result`: `JobFailed`, `JobCancelled`, `TimeoutError` after
        ``timeout`` seconds). For short jobs a request waits for; ``timeout`` is not
        payload."""
        result = getattr(self.queue, "result", None)  # the queue's, or an integration's
        if result is None:
            raise ConfigurationError(f"{type(self.queue).__name__} cannot wait for results")
        return result(self.enqueue(**kwargs), timeout)

    def enqueue_with(self, payload: Mapping[str, Any], **options: Any) -> ULID:
        """Enqueue with options (priority, delay, at, dedup_key, on_duplicate,
        concurrency_key, after, on_parent_failure, conn)."""
        return self.queue.enqueue(self.definition.kind, payload, **options)

    def __repr__(self) -> str:
        return f"<venturi job {self.definition.kind!r} -> {self.__name__}>"
