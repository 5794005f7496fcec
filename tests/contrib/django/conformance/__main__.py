"""``python -m tests.contrib.django.conformance [pytest options]``: fetch Django's tasks
tests, adapt their set-up and run them with pytest against `VenturiBackend`."""

from __future__ import annotations

import sys

import django
import pytest

from .source import adapt, cache_dir, fetch


def main(argv: list[str]) -> int:
    package = adapt(fetch(), cache_dir() / "adapted")
    print(f"Django {django.__version__}'s tests/tasks, adapted in {package}", flush=True)
    return int(
        pytest.main(
            [
                *("-p", "tests.contrib.django.conformance.plugin"),
                *("-c", str(package.parent / "pytest.ini"), "--rootdir", str(package.parent)),
                *("-p", "no:cacheprovider", "-rfEX"),
                *argv,
                str(package),
            ]
        )
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
