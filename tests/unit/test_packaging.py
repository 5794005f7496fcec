"""The packaging rules that need no build: packages are discovered, the version is read
without importing venturi, nothing claims Windows, and the checks that compare a wheel
and an installed package with the checkout see each violation staged here."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.packaging import (
    checkout_files,
    unexplained_import_failures,
    wheel_differences,
)

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_no_package_is_listed_by_hand() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert "packages" not in setuptools and "py-modules" not in setuptools
    assert setuptools["package-dir"] == {"venturi": "venturi", "venturi.sql": "sql"}


def test_the_checkout_maps_sql_into_venturi_sql() -> None:
    expected = checkout_files(ROOT)
    assert "venturi/processes/__init__.py" in expected
    assert "venturi/sql/__init__.py" in expected
    assert "venturi/sql/migrations/0001_initial.sql" in expected
    assert "venturi/py.typed" in expected
    assert not any(p.startswith("sql/") or "__pycache__" in p for p in expected)


def test_a_module_dropped_from_the_wheel_is_reported() -> None:
    expected = checkout_files(ROOT)
    staged = sorted(expected - {"venturi/processes/channel.py"})
    assert wheel_differences(expected, staged) == ["missing: venturi/processes/channel.py"]


def test_a_stray_file_in_the_wheel_is_reported() -> None:
    expected = checkout_files(ROOT)
    staged = [*expected, "sql/claim.sql", "venturi-0.1.0.dist-info/METADATA"]
    assert wheel_differences(expected, staged) == ["unexpected: sql/claim.sql"]


def test_caches_in_a_checkout_are_not_expected_in_the_wheel(tmp_path: Path) -> None:
    for name in (
        "venturi/__init__.py",
        "venturi/__pycache__/__init__.cpython-311.pyc",
        "venturi/stale.pyc",
        "sql/__init__.py",
        "sql/new_folder/q.sql",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert checkout_files(tmp_path) == {
        "venturi/__init__.py",
        "venturi/sql/__init__.py",
        "venturi/sql/new_folder/q.sql",
    }


def test_an_import_failure_is_excused_only_by_its_listed_dependency() -> None:
    optional = {"venturi.contrib.django.tasks": "django.tasks"}
    failures = {
        "venturi.contrib.django.tasks": ("ModuleNotFoundError", "django.tasks"),
        "venturi.processes": ("ModuleNotFoundError", "venturi.processes"),
    }
    assert unexplained_import_failures(failures, optional) == [
        "venturi.processes: ModuleNotFoundError (missing venturi.processes)"
    ]
    # The listed module failing for another reason is not excused either.
    other = {"venturi.contrib.django.tasks": ("ImportError", None)}
    assert unexplained_import_failures(other, optional) == [
        "venturi.contrib.django.tasks: ImportError"
    ]


def test_the_version_is_a_literal_setuptools_reads_without_importing() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "venturi.__version__"}
    # setuptools evaluates the attribute statically only when it is a plain literal;
    # anything else makes the build import venturi and its dependencies.
    tree = ast.parse((ROOT / "venturi" / "__init__.py").read_text())
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    assert len(literals) == 1, "venturi/__init__.py must assign __version__ one str literal"


def test_import_venturi_reads_no_metadata_of_its_own() -> None:
    # Dependencies (psycopg) look up their own versions at import; venturi must not.
    probe = """
import importlib.metadata as metadata, json
asked = []
def spy(function):
    def wrapper(*args, **kwargs):
        asked.append([function.__name__, *map(str, args)])
        return function(*args, **kwargs)
    return wrapper
for name in ("version", "distribution", "metadata", "files", "requires", "entry_points",
             "distributions", "packages_distributions"):
    setattr(metadata, name, spy(getattr(metadata, name)))
import venturi
print(json.dumps(asked))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    asked = json.loads(done.stdout.splitlines()[-1])
    assert [call for call in asked if "venturi" in call or len(call) == 1] == []


def test_the_classifiers_claim_linux_and_macos_and_no_windows() -> None:
    classifiers = PYPROJECT["project"]["classifiers"]
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert "Operating System :: MacOS" in classifiers
    assert not [c for c in classifiers if "Windows" in c or "OS Independent" in c]
    assert PYPROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
