"""Worker processes under one supervisor: `venturi worker --processes N`.

`WorkerGroup` starts N fresh interpreters, each running one worker
(`venturi.processes.child`), restarts and recycles them, and stops them together::

    from venturi.processes import WorkerGroup

    WorkerGroup.for_app("shop.jobs:queue", 4, worker_args=["--concurrency", "8"]).run()
"""

from venturi.processes.group import WorkerGroup, WorkerGroupFailed

__all__ = ["WorkerGroup", "WorkerGroupFailed"]
