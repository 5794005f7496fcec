"""Worker processes under one supervisor: `venturi worker --processes N`.

`venturi.processes.group.WorkerGroup` starts N fresh interpreters, each running one
worker (`venturi.processes.child`), restarts and recycles them, and stops them together.
"""
