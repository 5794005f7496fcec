"""The testing helpers' own tests: `venturi_dsn` is the suite's server, and pytester
builds throwaway projects that use the plugin as a user would."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def venturi_dsn(database_dsn: str) -> str:
    """The plugin's fixtures use the server the rest of the suite uses."""
    return database_dsn
