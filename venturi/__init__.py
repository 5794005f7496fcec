"""venturi: a synchronous PostgreSQL-backed background job queue."""

import logging

from venturi.backoff import constant, exponential
from venturi.client import Queue
from venturi.context import JobContext, current_job
from venturi.durable import DuplicateStep, SignalRefused, StepFenced, StepOrderChanged, TimedOut
from venturi.errors import (
    ConfigurationError,
    DuplicateJob,
    ForkedError,
    InvalidJob,
    InvalidPayload,
    InvalidPrefix,
    JobCancelled,
    JobFailed,
    ListenerPolling,
    MigrationLockTimeout,
    SchemaError,
    StoreError,
    StoreUnavailable,
    UnknownJob,
    UnknownKind,
    VenturiError,
    WorkerFailed,
)
from venturi.events import WorkerEvents
from venturi.models import (
    DurableState,
    HistoryCursor,
    JobRecord,
    JobStatus,
    JournalRecord,
    NewJob,
    Outcome,
    SignalRecord,
    StatsSnapshot,
    StepRecord,
    WaitRecord,
)
from venturi.outcomes import Fail, Pause, Retry
from venturi.registry import JobFunction
from venturi.schedules.retention import Retention
from venturi.schedules.schedule import Schedule, ScheduleInfo
from venturi.store.failover import DatabaseServer
from venturi.upkeep import HorizonHolder, VacuumHealth
from venturi.worker.runtime import Worker

logging.getLogger("venturi").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "DatabaseServer",
    "DuplicateJob",
    "DuplicateStep",
    "DurableState",
    "Fail",
    "ForkedError",
    "HistoryCursor",
    "HorizonHolder",
    "InvalidJob",
    "InvalidPayload",
    "InvalidPrefix",
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobFunction",
    "JobRecord",
    "JobStatus",
    "JournalRecord",
    "ListenerPolling",
    "MigrationLockTimeout",
    "NewJob",
    "Outcome",
    "Pause",
    "Queue",
    "Retention",
    "Retry",
    "Schedule",
    "ScheduleInfo",
    "SchemaError",
    "SignalRecord",
    "SignalRefused",
    "StatsSnapshot",
    "StepFenced",
    "StepOrderChanged",
    "StepRecord",
    "StoreError",
    "StoreUnavailable",
    "TimedOut",
    "UnknownJob",
    "UnknownKind",
    "VacuumHealth",
    "VenturiError",
    "WaitRecord",
    "Worker",
    "WorkerEvents",
    "WorkerFailed",
    "constant",
    "current_job",
    "exponential",
]
