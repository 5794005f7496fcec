"""Fault, race and bad-input tests: real worker processes, injected faults, SQL invariants."""
