"""The worker: dispatcher, handler loop, settlement, heartbeat, reaper and their parts."""

from venturi.worker.runtime import Worker

__all__ = ["Worker"]
