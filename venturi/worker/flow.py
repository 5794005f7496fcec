"""A worker's view of flow control: it declares its kinds' limits, learns which of its
kinds the database holds limited, and wakes the cluster when a limited run ends."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Final

import attrs

from venturi.errors import StoreError
from venturi.limits import KindLimits
from venturi.models import JobRecord
from venturi.registry import JobDefinition
from venturi.store.protocol import Store

logger = logging.getLogger("venturi.worker")

# How often a worker reads the kinds' limits again, so a declaration made by another
# deployment (or a pause) is followed within about this long. Until then the database
# still keeps every limit: the plain claim leaves limited kinds alone.
REFRESH_INTERVAL: Final = 1.0


@attrs.define(eq=False)
class FlowView:
    """The limits of a worker's kinds: declared once (`refresh` retries until it is),
    then read back from the database, where the latest declaration of each kind wins.

    ``limited``: the worker's kinds claimed through the limited claim; ``rated``: those
    of them with a rate; ``waited``: those whose free places open when a run ends (a
    concurrency or key limit), whose ends `run_ended` announces to every worker;
    ``passed``: those with a global concurrency and no other limit, whose completed runs
    pass their place straight to the kind's next job (`venturi.worker.passing`).
    Until the first read, the worker's own declaration stands in for the database's.
    """

    store: Store
    declared_by: str
    limits: list[KindLimits]
    declared: bool = attrs.field(init=False, default=False)
    limited: frozenset[str] = attrs.field(init=False)
    rated: frozenset[str] = attrs.field(init=False)
    waited: frozenset[str] = attrs.field(init=False)
    passed: frozenset[str] = attrs.field(init=False)
    # Wakes this worker's own dispatcher (set once it exists): it claims the freed place
    # while the notification to the other workers is still on its way.
    wake: Callable[[], None] = attrs.field(init=False, default=lambda: None)

    def __attrs_post_init__(self) -> None:
        self._adopt(self.limits)

    @classmethod
    def of(
        cls,
        store: Store,
        declared_by: str,
        kinds: list[str],
        definitions: Mapping[str, JobDefinition],
    ) -> FlowView:
        return cls(store, declared_by, [definitions[kind].limits for kind in kinds])

    def refresh(self, store: Store | None = None) -> None:
        """Declare the worker's limits if not yet done, then read the kinds' limits back
        (through ``store``, by default the view's own)."""
        store = self.store if store is None else store
        if not self.declared:
            store.declare_kinds(self.limits, self.declared_by)
            self.declared = True
        mine = {limits.kind for limits in self.limits}
        self._adopt([state.limits for state in store.kinds() if state.kind in mine])

    def _adopt(self, limits: list[KindLimits]) -> None:
        self.limited = frozenset(d.kind for d in limits if d.limited)
        self.rated = frozenset(d.kind for d in limits if d.rate is not None)
        self.waited = frozenset(
            d.kind for d in limits if d.concurrency is not None or d.key_concurrency is not None
        )
        self.passed = frozenset(
            d.kind
            for d in limits
            if d.concurrency is not None and d.key_concurrency is None and d.rate is None
        )

    def run_ended(self, job: JobRecord) -> None:
        """A run of ``job`` was settled: if its kind has a concurrency or key limit, its
        place is free now, so wake every worker (the notification of this worker's own
        session reaches it too). Never raises: a lost wakeup costs a recheck interval."""
        if job.kind not in self.waited:
            return
        self.wake()
        try:
            self.store.notify(job.kind)
        except StoreError as exc:
            logger.warning("could not announce the end of a %s run: %s", job.kind, exc)
