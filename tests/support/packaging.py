"""What the wheel must hold, read from a checkout, and the checks that compare a built
wheel (or an installed package's imports) with it. Pure functions over file lists, so the
unit tests stage each violation without building anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

# Where each top-level folder of the checkout lands in the wheel (pyproject.toml's
# package-dir): sql/ ships as the subpackage venturi.sql.
PACKAGE_DIRS: Mapping[str, str] = {"venturi": "venturi", "sql": "venturi/sql"}
# What a checkout may hold under those folders that is never shipped: the interpreter's
# and the tools' caches.
_NOT_SHIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"})
_NOT_SHIPPED_SUFFIXES = (".pyc", ".pyo")
# What the build copies into the checkout it builds from; the junk a copy leaves out.
_BUILD_LEFTOVERS = ("build", "dist", "*.egg-info", ".git", ".venv", "_build", "__pycache__")


def checkout_files(root: Path) -> set[str]:
    """The paths, as the wheel names them, of every file the package folders of the
    checkout at ``root`` hold: each must be in the wheel."""
    expected: set[str] = set()
    for folder, target in PACKAGE_DIRS.items():
        base = root / folder
        for directory, subdirs, files in os.walk(base):
            subdirs[:] = [d for d in subdirs if d not in _NOT_SHIPPED_DIRS]
            for name in files:
                if name.endswith(_NOT_SHIPPED_SUFFIXES):
                    continue
                relative = (Path(directory) / name).relative_to(base).as_posix()
                expected.add(f"{target}/{relative}")
    return expected


def package_files(wheel_names: Iterable[str]) -> set[str]:
    """A wheel's files less its ``.dist-info`` metadata: what it installs as code."""
    return {n for n in wheel_names if not n.split("/", 1)[0].endswith(".dist-info")}


def wheel_differences(expected: set[str], wheel_names: Iterable[str]) -> list[str]:
    """``missing: PATH`` for each checkout file the wheel lacks and ``unexpected: PATH``
    for each file it ships that the checkout's package folders do not hold (a stray
    top-level ``sql`` package, say); empty when the wheel is the checkout's package."""
    shipped = package_files(wheel_names)
    return [f"missing: {p}" for p in sorted(expected - shipped)] + [
        f"unexpected: {p}" for p in sorted(shipped - expected)
    ]


def wheel_names(wheel: Path) -> list[str]:
    """The files in ``wheel``, as its zip directory lists them."""
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def wheel_contents(wheel: Path) -> dict[str, bytes]:
    """Every file of ``wheel`` with its bytes."""
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def copy_checkout(root: Path, destination: Path) -> Path:
    """A copy of the checkout at ``root`` (uncommitted edits included) without build
    leftovers or caches, so building from it leaves the checkout untouched."""
    shutil.copytree(root, destination, ignore=shutil.ignore_patterns(*_BUILD_LEFTOVERS))
    return destination


def build(source: Path, outdir: Path, *kinds: str, timeout: float = 600) -> list[Path]:
    """Run ``python -m build`` on ``source`` (``kinds``: ``--sdist``, ``--wheel``, or none
    for an sdist and a wheel built from it) into ``outdir``; the files it made."""
    done = subprocess.run(
        [sys.executable, "-m", "build", *kinds, "--outdir", str(outdir), str(source)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout}\n{done.stderr}"
    return sorted(outdir.iterdir())


def unexplained_import_failures(
    failures: Mapping[str, tuple[str, str | None]], optional: Mapping[str, str]
) -> list[str]:
    """The import failures no optional dependency explains, one line each.

    ``failures`` maps a module to its exception's type and, for a
    ``ModuleNotFoundError``, the missing module's name. ``optional`` maps a module to
    the one dependency whose absence excuses it: any other failure of that module, or
    any failure of a module not in it, is unexplained."""
    unexplained = []
    for module, (error, missing) in sorted(failures.items()):
        needs = optional.get(module)
        if needs is not None and error == "ModuleNotFoundError" and missing == needs:
            continue
        reason = f"{error} (missing {missing})" if missing else error
        unexplained.append(f"{module}: {reason}")
    return unexplained
