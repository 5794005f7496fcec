"""The tools (CLI, demo, benchmark, dashboard) and the framework integrations reach the database
only through the `Store` protocol: never the SQL loader or the PostgreSQL store's module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "venturi"
# Modules behind the door: the SQL loader and the store built on it.
BEHIND_THE_DOOR = frozenset({"venturi.store.sqlfiles", "venturi.store.postgres"})


def tool_modules() -> list[Path]:
    tools = [
        *PACKAGE.joinpath("cli").rglob("*.py"),
        *PACKAGE.joinpath("bench").rglob("*.py"),
        *PACKAGE.joinpath("dashboard").rglob("*.py"),
    ]
    return sorted([*tools, *PACKAGE.joinpath("contrib").rglob("*.py")])


def doors_used(source: str) -> set[str]:
    """The modules behind the door that ``source`` imports."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            used.add(node.module)
            used.update(f"{node.module}.{alias.name}" for alias in node.names)
    return used & BEHIND_THE_DOOR


@pytest.mark.parametrize("path", tool_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_tools_and_integrations_use_only_the_store(path: Path) -> None:
    assert doors_used(path.read_text()) == set(), f"{path.name} reaches behind the store"


def test_the_check_finds_each_way_of_reaching_behind_the_door() -> None:
    assert doors_used("from venturi.store import sqlfiles") == {"venturi.store.sqlfiles"}
    assert doors_used("import venturi.store.postgres") == {"venturi.store.postgres"}
    assert doors_used("from venturi.store.postgres import redact_dsn") == {"venturi.store.postgres"}
    assert doors_used("from venturi.store.protocol import Store\nimport venturi") == set()
