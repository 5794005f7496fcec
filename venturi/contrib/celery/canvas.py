"""The canvas: signatures, ``chain``, ``group`` and ``chord`` written as one venturi
workflow (one transaction), each step waiting for its parents with ``depends_on=``.

A step after a single task receives that task's result as its first positional
argument; a step after a group receives the list of the group's results, in the group's
order (a chord's body). An immutable signature (``.si()``) receives neither. A step whose
parent failed or was revoked is cancelled (REVOKED), and so are its own followers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ulid import ULID

from venturi.workflows import Workflow

from .current import current_app
from .exceptions import NotSupported
from .options import call_options
from .results import AsyncResult, GroupResult

if TYPE_CHECKING:
    from .app import Celery
    from .tasks import Task

Placed = tuple[list[ULID], str, Any]
"""What placing a canvas node leaves: the ids the next step waits for, how their results
reach it ("one" or "list"), and the node's result object."""


class Signature:
    """A task with (partial) arguments and call options: ``task.s(...)``."""

    def __init__(
        self,
        task: Task,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        immutable: bool = False,
    ) -> None:
        self.task = task
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.options = dict(options or {})
        self.immutable = immutable
        self._links: list[Signature] = []
        for name in ("link_error", "task_id"):
            if name in self.options:
                raise NotSupported(f"the signature option {name}=", "see the guide's table")

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def app(self) -> Celery:
        return self.task.app

    def clone(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Signature:
        """A copy with ``args`` put before these, ``kwargs`` and ``options`` merged in."""
        copy = Signature(
            self.task,
            tuple(args or ()) + self.args,
            {**self.kwargs, **(kwargs or {})},
            {**self.options, **options},
            self.immutable,
        )
        copy._links = list(self._links)
        return copy

    def set(self, immutable: bool | None = None, **options: Any) -> Signature:
        """Add call options (``countdown``, ``priority``, ...) in place; returns self."""
        if immutable is not None:
            self.immutable = immutable
        self.options.update(options)
        return self

    def link(self, callback: Signature) -> Signature:
        """Run ``callback`` with this task's result once it succeeds (a chain step)."""
        self._links.append(callback)
        return callback

    def link_error(self, errback: Signature) -> Signature:
        raise NotSupported(
            "link_error (error callbacks)", "read AsyncResult.state, or use on_parent_failure"
        )

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncResult:
        """Enqueue it; ``args`` are put before the signature's own (a partial)."""
        merged = self.clone(args, kwargs, **options)
        if not merged._links:
            return merged.task.apply_async(merged.args, merged.kwargs, **merged.options)
        return chain(merged._without_links(), *merged._links).apply_async()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here, now, with these arguments put before the signature's."""
        merged = self.clone(args, kwargs)
        return merged.task(*merged.args, **merged.kwargs)

    def _without_links(self) -> Signature:
        copy = self.clone()
        copy._links = []
        return copy

    def __or__(self, other: Any) -> Any:
        return chain(self, other)

    def place(self, wf: Workflow, after: list[ULID], feed: str | None) -> Placed:
        if self._links:
            return chain(self._without_links(), *self._links).place(wf, after, feed)
        payload, options = call_options(
            self.name, self.args, self.kwargs, dict(self.options), self.app.configured()
        )
        if after and not self.immutable:
            payload = {**payload, "feed": feed, "parents": [str(i) for i in after]}
        options.pop("conn", None)
        job_id = wf.add_with(self.name, payload, depends_on=after or None, **options)
        return [job_id], "one", AsyncResult(job_id, self.app)

    def __repr__(self) -> str:
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(arguments)})" + ("!" if self.immutable else "")


def signature(
    varies: Any,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> Signature:
    """``signature("tasks.add", args=(2, 2))`` (a task of the current app, by name),
    ``signature(add, ...)`` or a signature as given."""
    if isinstance(varies, Signature):
        return varies.clone(args, kwargs, **options)
    if isinstance(varies, str):
        return current_app().signature(varies, args, kwargs, **options)
    from .tasks import Task

    if isinstance(varies, Task):
        return varies.signature(args, kwargs, **options)
    raise TypeError(f"signature() takes a task name, a task or a signature, got {varies!r}")


def signature_of(value: Any) -> Any:
    """A canvas node as given (a signature, chain, group, chord), or a task's signature."""
    from .tasks import Task

    if isinstance(value, Task):
        return value.s()
    if isinstance(value, Signature | chain | group | chord):
        return value
    if isinstance(value, dict):
        raise NotSupported("signatures as dicts", "build them with task.s()")
    raise TypeError(f"expected a signature, chain, group or chord, got {type(value).__name__}")


def _app_of(node: Any) -> Celery:
    if isinstance(node, Signature):
        return node.app
    if isinstance(node, chain | group):
        for member in node.tasks:
            return _app_of(member)
    if isinstance(node, chord):
        return _app_of(node.header)
    return current_app()


def _write(
    node: Any,
    args: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> Any:
    """Write ``node`` as one workflow (on ``conn`` if given) and return its result."""
    conn = options.get("conn")
    app = _app_of(node)
    if args or kwargs:
        node = _with_arguments(node, tuple(args or ()), dict(kwargs or {}))
    with app.workflow(conn) as wf:
        _, _, result = node.place(wf, [], None)
    return result


def _with_arguments(node: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``node`` with arguments given at call time put before its first steps'."""
    if isinstance(node, Signature):
        return node.clone(args, kwargs)
    if isinstance(node, chain):
        first, *rest = node.tasks
        return chain(_with_arguments(first, args, kwargs), *rest)
    if isinstance(node, group):
        return group(_with_arguments(m, args, kwargs) for m in node.tasks)
    if isinstance(node, chord):
        return chord(_with_arguments(node.header, args, kwargs), node.body)
    return node


class chain:  # Celery's name
    """Run tasks one after another, each given the previous one's result first:
    ``chain(add.s(2, 2), mul.s(8))`` or ``add.s(2, 2) | mul.s(8)``."""

    def __init__(self, *tasks: Any) -> None:
        if len(tasks) == 1 and not isinstance(tasks[0], Signature | chain | group | chord):
            tasks = tuple(tasks[0])
        flat: list[Any] = []
        for node in map(signature_of, tasks):
            flat.extend(node.tasks if isinstance(node, chain) else [node])
        if not flat:
            raise ValueError("a chain needs at least one task")
        self.tasks: tuple[Any, ...] = tuple(flat)

    def __or__(self, other: Any) -> chain:
        return chain(self, other)

    def __call__(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncResult:
        """Write the chain in one transaction; the result is the last task's, with
        ``.parent`` the one before."""
        result: AsyncResult = _write(self, args, kwargs, options)
        return result

    def place(self, wf: Workflow, after: list[ULID], feed: str | None) -> Placed:
        previous: AsyncResult | GroupResult | None = None
        result: Any = None
        for node in self.tasks:
            after, feed, result = node.place(wf, after, feed)
            if isinstance(result, AsyncResult) and isinstance(previous, AsyncResult):
                result.parent = previous
            previous = result
        return after, feed or "one", result


class group:  # Celery's name
    """Run tasks in parallel: ``group(add.s(i, i) for i in range(10))()``; the result is
    a `GroupResult` whose ``get()`` lists the results in order."""

    def __init__(self, *tasks: Any) -> None:
        if len(tasks) == 1 and not isinstance(tasks[0], Signature | chain | group | chord):
            tasks = tuple(tasks[0])
        members = [signature_of(t) for t in tasks]
        for member in members:
            if isinstance(member, group):
                raise NotSupported(
                    "a group directly inside a group", "list its tasks in the outer group"
                )
        self.tasks: tuple[Any, ...] = tuple(members)

    def __or__(self, other: Any) -> chord | chain:
        other = signature_of(other)
        if isinstance(other, Signature):
            return chord(self, other)
        return chain(self, other)

    def __call__(self, *args: Any, **kwargs: Any) -> GroupResult:
        return self.apply_async(args, kwargs)

    def delay(self, *args: Any, **kwargs: Any) -> GroupResult:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> GroupResult:
        """Write every task in one transaction."""
        if not self.tasks:
            return GroupResult(None, [])
        result: GroupResult = _write(self, args, kwargs, options)
        return result

    def place(self, wf: Workflow, after: list[ULID], feed: str | None) -> Placed:
        tails: list[ULID] = []
        results: list[AsyncResult] = []
        for member in self.tasks:
            ids, _, result = member.place(wf, after, feed)
            tails.extend(ids)
            results.append(result)
        return tails, "list", GroupResult(wf.id, results)


class chord:  # Celery's name
    """A group and a callback that receives the list of its results:
    ``chord(add.s(i, i) for i in range(10))(xsum.s())``."""

    def __init__(self, header: Any, body: Any = None, **options: Any) -> None:
        self.header = header if isinstance(header, group) else group(header)
        self.body = None if body is None else signature_of(body)
        if options:
            raise NotSupported(
                f"chord options {', '.join(sorted(options))}", "set them on the body"
            )

    def __call__(self, body: Any = None, **options: Any) -> AsyncResult:
        if body is not None:
            return chord(self.header, body).apply_async(**options)
        return self.apply_async(**options)

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncResult:
        """Write the group and its callback in one transaction; the callback's result."""
        if self.body is None:
            raise ValueError("a chord needs a body: chord(header, body) or chord(header)(body)")
        result: AsyncResult = _write(self, args, kwargs, options)
        return result

    def place(self, wf: Workflow, after: list[ULID], feed: str | None) -> Placed:
        tails, mode, header_result = self.header.place(wf, after, feed)
        assert self.body is not None
        ids, next_mode, result = self.body.place(wf, tails, mode)
        if isinstance(result, AsyncResult):
            result.parent = header_result
        return ids, next_mode, result
