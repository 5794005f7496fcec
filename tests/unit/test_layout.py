"""The package's shape: `import venturi` loads the library only, never the tools or
their dependencies. (A module's size follows its role: no line cap.)"""

from __future__ import annotations

import json
import subprocess
import sys

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
