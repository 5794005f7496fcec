"""Django's own tasks tests (``tests/tasks/`` of the installed Django's source
distribution) run against `VenturiBackend`: ``python -m tests.contrib.django.conformance``.

`source` fetches them at run time (never committed) and changes only their set-up;
`backends` holds the stand-ins the adapted tests name; `plugin` configures Django and
gives each test a prefix of its own; `differences` lists, with a reason each, the tests
that assert a behaviour venturi deliberately does differently (expected to fail).
"""
