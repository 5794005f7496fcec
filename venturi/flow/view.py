"""A worker's view of flow control: it declares its kinds' limits and learns which of its
kinds the database holds limited. (The end of a limited run is announced to every worker
by the statement that settles it.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from venturi.flow.limits import KindLimits
from venturi.registry import JobDefinition
from venturi.store.postgres import PostgresStore

# How often a worker reads the kinds' limits again, so a declaration made by another
# deployment (or a pause) is followed within about this long. Until then the database
# still keeps every limit: the plain claim leaves limited kinds alone.
REFRESH_INTERVAL: Final = 1.0


@attrs.define(eq=False)
class FlowView:
    """The limits of a worker's kinds: declared once (`refresh` retries until it is),
    then read back from the database, where the latest declaration of each kind wins.

    ``limited``: the worker's kinds claimed through the limited claim; ``rated``: those
    of them with a rate; ``passed``: those with a global concurrency, no other limit
    and not fair, whose completed runs pass their place straight to the kind's next job
    (`venturi.worker.passing`).
    Until the first read, the worker's own declaration stands in for the database's.
    """

    store: PostgresStore
    declared_by: str
    limits: list[KindLimits]
    declared: bool = attrs.field(init=False, default=False)
    limited: frozenset[str] = attrs.field(init=False)
    rated: frozenset[str] = attrs.field(init=False)
    passed: frozenset[str] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._adopt(self.limits)

    @classmethod
    def of(
        cls,
        store: PostgresStore,
        declared_by: str,
        kinds: list[str],
        definitions: Mapping[str, JobDefinition],
    ) -> FlowView:
        return cls(store, declared_by, [definitions[kind].limits for kind in kinds])

    def refresh(self, store: PostgresStore | None = None) -> None:
        """Declare the worker's limits if not yet done, then read the kinds' limits back
        (through ``store``, by default the view's own)."""
        store = self.store if store is None else store
        if not self.declared:
            store.declare_kinds(self.limits, self.declared_by)
            self.declared = True
        mine = {limits.kind for limits in self.limits}
        self._adopt([limits for limits, _ in store.reads.kind_limits() if limits.kind in mine])

    def _adopt(self, limits: list[KindLimits]) -> None:
        self.limited = frozenset(d.kind for d in limits if d.limited)
        self.rated = frozenset(d.kind for d in limits if d.rate is not None)
        self.passed = frozenset(
            d.kind
            for d in limits
            if d.concurrency is not None
            and d.key_concurrency is None
            and d.rate is None
            and not d.fair
        )
