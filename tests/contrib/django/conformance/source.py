"""Django's ``tests/tasks/`` for the installed Django, from its source distribution on
PyPI (fetched once into a cache under the temp dir, never committed), with only their
set-up changed: the backends they configure and import become venturi's stand-ins."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Final

import django

STAND_INS: Final = "tests.contrib.django.conformance.backends"

# (text in Django's test files, what it becomes). Each must be found: a Django release
# that changed its tests' set-up fails the run loudly rather than testing Django's own
# backends.
SET_UP: Final = (
    ('"django.tasks.backends.immediate.ImmediateBackend"', f'"{STAND_INS}.ImmediateBackend"'),
    ('"django.tasks.backends.dummy.DummyBackend"', f'"{STAND_INS}.DummyBackend"'),
    (
        "from django.tasks.backends.immediate import ImmediateBackend",
        f"from {STAND_INS} import ImmediateBackend",
    ),
    (
        "from django.tasks.backends.dummy import DummyBackend",
        f"from {STAND_INS} import DummyBackend",
    ),
)


class SourceUnavailable(Exception):
    """Django's source distribution could not be fetched or read."""


def cache_dir(version: str = django.__version__) -> Path:
    return Path(tempfile.gettempdir()) / "venturi-django-tests" / version


def fetch(version: str = django.__version__) -> Path:
    """The pristine ``tests/tasks`` of Django ``version`` (downloaded on first use)."""
    root = cache_dir(version)
    pristine = root / "pristine" / "tasks"
    if (pristine / "__init__.py").exists():
        return pristine
    download = root / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    command = [
        *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"),
        *("--no-binary", ":all:", f"django=={version}", "--dest", str(download)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    archives = sorted(download.glob("*.tar.gz"))
    if done.returncode != 0 or not archives:
        raise SourceUnavailable(f"pip download of django=={version} failed:\n{done.stderr}")
    members = f"{archives[0].name.removesuffix('.tar.gz')}/tests/tasks/"
    unpacked = root / "unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(archives[0]) as archive:
        wanted = [m for m in archive.getmembers() if m.name.startswith(members) and m.isfile()]
        if not wanted:
            raise SourceUnavailable(f"{archives[0].name} has no {members}")
        archive.extractall(unpacked, members=wanted, filter="data")
    pristine.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(pristine, ignore_errors=True)
    shutil.move(unpacked / members, pristine)
    return pristine


def adapt(pristine: Path, into: Path) -> Path:
    """Copy ``pristine`` to ``into/tasks`` with `SET_UP` applied; returns that package.

    The package keeps its name, ``tasks``: Django's tests check their tasks' module paths
    (``tasks.tasks.noop_task``).
    """
    package = into / "tasks"
    shutil.rmtree(package, ignore_errors=True)
    shutil.copytree(pristine, package)
    unused = dict(SET_UP)
    for path in sorted(package.glob("*.py")):
        text = path.read_text()
        for old, new in SET_UP:
            if old in text:
                text = text.replace(old, new)
                unused.pop(old, None)
        path.write_text(text)
    if unused:
        raise SourceUnavailable(
            f"Django {django.__version__}'s tests no longer contain: {', '.join(unused)}"
        )
    # The run's own configuration, so the repository's (warnings as errors) stays out.
    (into / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\ntimeout = 300\n")
    return package
