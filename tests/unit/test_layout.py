"""The package's shape: `import venturi` loads the library only, never the tools or
their dependencies. (A module's size follows its role: no line cap.)"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

# Tools and optional dependencies a plain `import venturi` must leave unloaded.
TOOLS = (
    "click",
    "rich",
    "prometheus_client",
    "jinja2",
    "venturi.cli",
    "venturi.bench",
    "venturi.dashboard",
)


def loaded_tools(code: str) -> list[str]:
    """The modules of `TOOLS` (or under them) loaded after running ``code`` in a fresh
    interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = json.loads(out.splitlines()[-1])
    return [m for m in loaded if any(m == t or m.startswith(f"{t}.") for t in TOOLS)]


def test_import_venturi_loads_no_tool() -> None:
    assert loaded_tools("import venturi") == []


def test_the_import_check_sees_a_tool() -> None:
    assert "venturi.bench" in loaded_tools("import venturi.bench")
    assert "click" in loaded_tools("import venturi.cli")


def test_the_cli_loads_the_benchmark_only_for_bench() -> None:
    assert "venturi.bench" not in loaded_tools("from venturi.cli import build_cli\nbuild_cli()")


# -- the import graph ---------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[2] / "venturi"
# The tools and integrations stand above the library; the library never imports them.
ABOVE_THE_LIBRARY = (
    "venturi.__main__",
    "venturi.cli",
    "venturi.bench",
    "venturi.dashboard",
    "venturi.contrib",
)
# Each layer of the library, lowest first: a module may import its own layer and those
# below, never one above (the values know no store, the store no worker, the worker no
# Queue). Modules not listed sit at the top, beside `venturi.client`.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "venturi.errors",
        "venturi.durations",
        "venturi.payload",
        "venturi.prefix",
        "venturi.jsonlog",
        "venturi.stopping",
        "venturi.coroutines",
        "venturi.observations",
        "venturi.upkeep",
        "venturi.models",
        "venturi.backoff",
        "venturi.outcomes",
        "venturi.settlements",
        "venturi.durable",
        "venturi.context",
        "venturi.events",
        "venturi.flow.limits",
        "venturi.registry",
        "venturi.schedules.cron",
        "venturi.schedules.schedule",
        "venturi.schedules.retention",
        "venturi.metrics_server",
    ),
    ("venturi.store",),
    ("venturi.loops", "venturi.flow.view", "venturi.schedules.scheduler", "venturi.waiting"),
    ("venturi.worker", "venturi.workflows"),
)


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that the module ``name`` (its ``source``) imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")[: None if is_package else -1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target not in (name, "venturi"):
                found.add(target)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports."""
    paths = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    known = set(paths)
    return {
        name: imports_of(path.read_text(), name, path.name == "__init__.py", known)
        for name, path in paths.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (strongly connected groups of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one."""
    return any(module == p or module.startswith(f"{p}.") for p in packages)


def layer_of(module: str) -> int:
    for level, members in enumerate(LAYERS):
        if within(module, members):
            return level
    return len(LAYERS)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports of the library that point to a higher layer or to a tool."""
    wrong = []
    for module, targets in graph.items():
        if within(module, ABOVE_THE_LIBRARY):
            continue
        for target in targets:
            if within(target, ABOVE_THE_LIBRARY) or layer_of(target) > layer_of(module):
                wrong.append((module, target))
    return sorted(wrong)


def library(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: t for m, t in graph.items() if not within(m, ABOVE_THE_LIBRARY)}


def test_the_library_has_no_import_cycle() -> None:
    assert cycles(library(import_graph())) == []


def test_no_library_import_points_up_a_layer() -> None:
    assert upward_imports(import_graph()) == []


def test_the_graph_checks_see_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    package = tmp_path / "venturi"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("")
    (package / "store" / "postgres.py").write_text("from venturi.worker import runtime\n")
    (package / "worker").mkdir()
    (package / "worker" / "__init__.py").write_text("")
    (package / "worker" / "runtime.py").write_text("from ..store.postgres import x\n")
    graph = import_graph(package)
    assert cycles(graph) == [["venturi.store.postgres", "venturi.worker.runtime"]]
    assert upward_imports(graph) == [("venturi.store.postgres", "venturi.worker.runtime")]
