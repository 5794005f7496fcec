"""The package's shape: `import venturi` loads the library only, never the tools or
their dependencies, and no module grows past what a reader takes in at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "venturi"
MAX_LINES = 400
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


def oversized(paths: list[Path], limit: int = MAX_LINES) -> list[str]:
    """``path: lines`` for each file longer than ``limit`` lines."""
    counts = {p: len(p.read_text().splitlines()) for p in paths}
    return [f"{p.relative_to(p.parents[1])}: {n}" for p, n in counts.items() if n > limit]


def test_import_venturi_loads_no_tool() -> None:
    assert loaded_tools("import venturi") == []


def test_the_import_check_sees_a_tool() -> None:
    assert "venturi.bench" in loaded_tools("import venturi.bench")
    assert "click" in loaded_tools("import venturi.cli")


def test_the_cli_loads_the_benchmark_only_for_bench() -> None:
    assert "venturi.bench" not in loaded_tools("from venturi.cli import build_cli\nbuild_cli()")


def test_no_module_is_over_the_line_limit() -> None:
    assert oversized(sorted(PACKAGE.rglob("*.py"))) == []


def test_the_size_check_sees_a_long_module(tmp_path: Path) -> None:
    long = tmp_path / "pkg" / "long.py"
    long.parent.mkdir()
    long.write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert oversized(sorted(long.parent.glob("*.py"))) == [f"pkg/long.py: {MAX_LINES + 1}"]
