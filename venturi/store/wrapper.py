"""`StoreWrapper`: a store that passes every operation on to another one, so a layer that
watches a few operations (test modes, tracing) overrides those and nothing else."""

from __future__ import annotations

from typing import Any

from venturi.store.protocol import Store


class StoreWrapper:
    """Hands every operation of the `Store` protocol to ``inner``; subclasses override
    the ones they watch. ``unwrapped`` is the innermost store."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the subclass does not define itself.
        return getattr(self.inner, name)

    @property
    def unwrapped(self) -> Store:
        inner = self.inner
        return inner.unwrapped if isinstance(inner, StoreWrapper) else inner
