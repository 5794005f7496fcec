"""The settings schema the Flask and Django integrations share: one set of keys for the
queue, one rule per kind of value, one error type.

Each integration subclasses `QueueSettings`, adds its own keys, and says how a key is
spelled in its configuration (``VENTURI_POOL_SIZE`` in a Flask config,
``VENTURI['POOL_SIZE']`` in Django settings), so every message names the key as the
user wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

import attrs

from venturi.client import DEFAULT_PREFIX
from venturi.durations import to_seconds
from venturi.errors import ConfigurationError, InvalidJob
from venturi.payload import DEFAULT_MAX_PAYLOAD_BYTES
from venturi.schedules.retention import DEFAULT_RETENTION, Retention

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]
TESTING_MODES = ("inline", "manual")


class SettingsError(ConfigurationError):
    """A venturi key of a framework's configuration is unknown or holds a bad value."""


def _rule(holds: Callable[[Any], bool], wanted: str, *, optional: bool = False) -> Validator:
    """A validator raising the settings class's error, naming the key as it is spelled."""

    def check(settings: QueueSettings, field: attrs.Attribute[Any], value: Any) -> None:
        if (value is None and optional) or holds(value):
            return
        raise settings.error(f"{settings.key(field.name)} must be {wanted}, got {value!r}")

    return check


def _is_positive_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_filled_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_names(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, str) for v in value)


positive_int = _rule(_is_positive_int, "a positive int")
optional_positive_int = _rule(_is_positive_int, "a positive int or None", optional=True)
any_str = _rule(_is_str, "a str")
optional_str = _rule(_is_str, "a str or None", optional=True)
filled_str = _rule(_is_filled_str, "a str, not empty")
optional_filled_str = _rule(_is_filled_str, "a str, not empty, or None", optional=True)
flag = _rule(lambda value: isinstance(value, bool), "True or False")
testing_mode = _rule(
    lambda value: value in TESTING_MODES, "'inline', 'manual' or None", optional=True
)
names = _rule(_is_names, "a list of names (not one str)")
optional_names = _rule(_is_names, "a list of names (not one str) or None", optional=True)


def to_names(value: Any) -> Any:
    """A list of strings as a tuple; anything else as given, for `names` to refuse."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return value


def to_positive_seconds(value: Any) -> Any:
    """A positive duration (seconds or a timedelta) as seconds; anything else as given,
    for `positive_duration` to refuse."""
    try:
        return to_seconds(value, "duration", allow_zero=False)
    except InvalidJob:
        return value


def retention_value(settings: QueueSettings, field: attrs.Attribute[Any], value: Any) -> None:
    """Refuse what `Retention.of` refuses, naming the key as it is spelled."""
    try:
        Retention.of(value)
    except ConfigurationError as exc:
        raise settings.error(f"{settings.key(field.name)}: {exc}") from None


def positive_duration(settings: QueueSettings, field: attrs.Attribute[Any], value: Any) -> None:
    """Refuse what `to_positive_seconds` could not convert, with the duration rule broken."""
    if isinstance(value, float):
        return
    try:
        to_seconds(value, settings.key(field.name), allow_zero=False)
    except InvalidJob as exc:
        raise settings.error(str(exc)) from None
    raise settings.error(f"{settings.key(field.name)} must be a duration, got {value!r}")


@attrs.frozen
class QueueSettings:
    """The keys every integration reads for its `venturi.Queue`, checked; all optional.

    ``LISTEN_DSN``: where workers LISTEN when the queue's database is reached through a
    transaction-pooling proxy (the server itself); ``READ_DSN``: where the queue's reads
    (job, history, stats, kinds, schedules, workflow status) go, a replica or a read-only
    role (default: env ``VENTURI_READ_DSN``, else the queue's database); ``PREFIX``, ``POOL_SIZE``,
    ``STRICT``, ``MAX_PAYLOAD_BYTES``: as for `venturi.Queue`. ``RETENTION``: how long
    workers keep finished jobs, as ``Queue(retention=...)`` takes it (a mapping such as
    ``{"completed": "3d", "dead": None}``, text ``"completed=3d,dead=never"``, or None
    to keep every job); default completed and cancelled 1 day, dead 7 days.
    ``TESTING``: for test settings, ``"inline"`` (each job runs as it is enqueued) or
    ``"manual"`` (jobs wait for ``drain``), see `venturi.testing`; the queue's tables are
    then created on first use.
    """

    error: ClassVar[type[SettingsError]] = SettingsError
    config_prefix: ClassVar[str] = ""  # what the configuration's keys start with

    listen_dsn: str | None = attrs.field(default=None, validator=optional_filled_str)
    read_dsn: str | None = attrs.field(default=None, validator=optional_filled_str)
    prefix: str = attrs.field(default=DEFAULT_PREFIX, validator=filled_str)
    pool_size: int | None = attrs.field(default=None, validator=optional_positive_int)
    strict: bool = attrs.field(default=False, validator=flag)
    max_payload_bytes: int = attrs.field(default=DEFAULT_MAX_PAYLOAD_BYTES, validator=positive_int)
    testing: str | None = attrs.field(default=None, validator=testing_mode)
    retention: Any = attrs.field(default=DEFAULT_RETENTION, validator=retention_value)

    @classmethod
    def key(cls, name: str) -> str:
        """How the field ``name`` is named in messages: as the user writes it."""
        return cls.config_prefix + name.upper()

    @classmethod
    def from_keys(cls, given: Mapping[str, Any], where: str) -> Self:
        """Settings from ``given``, whose keys must all be ours; an unknown key (a typo)
        raises the settings' error, saying ``where`` the keys were read from."""
        known = {cls.config_prefix + field.name.upper(): field.name for field in attrs.fields(cls)}
        unknown = sorted(str(k) for k in given if k not in known)
        if unknown:
            raise cls.error(
                f"unknown {where} {', '.join(unknown)}; venturi reads {', '.join(known)}"
            )
        return cls(**{known[key]: value for key, value in given.items()})

    def queue_options(self) -> dict[str, Any]:
        """The `venturi.Queue` keywords these settings hold."""
        return {
            "prefix": self.prefix,
            "listen_dsn": self.listen_dsn,
            "read_dsn": self.read_dsn,
            "pool_size": self.pool_size,
            "strict": self.strict,
            "max_payload_bytes": self.max_payload_bytes,
            "retention": Retention.of(self.retention),
        }
