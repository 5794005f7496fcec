"""The conformance run's adaptation of Django's tasks tests: only their set-up changes,
and a set-up it no longer finds fails loudly (rather than testing Django's backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("django.tasks")

from tests.contrib.django.conformance.differences import DIFFERENCES
from tests.contrib.django.conformance.source import SET_UP, SourceUnavailable, adapt

SETTINGS = """TASKS = {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}
OTHER = {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}
"""
IMPORTS = """from django.tasks.backends.immediate import ImmediateBackend
from django.tasks.backends.dummy import DummyBackend

def test_body():
    assert "django.tasks.backends.immediate" != "left alone"
"""


def _pristine(root: Path, **files: str) -> Path:
    pristine = root / "pristine"
    pristine.mkdir()
    (pristine / "__init__.py").write_text("")
    for name, text in files.items():
        (pristine / f"{name}.py").write_text(text)
    return pristine


def test_the_backends_named_and_imported_become_the_stand_ins(tmp_path: Path) -> None:
    pristine = _pristine(tmp_path, test_settings=SETTINGS, test_imports=IMPORTS)
    package = adapt(pristine, tmp_path / "run")
    assert package == tmp_path / "run" / "tasks"
    settings = (package / "test_settings.py").read_text()
    imports = (package / "test_imports.py").read_text()
    stand_ins = "tests.contrib.django.conformance.backends"
    assert f'"{stand_ins}.ImmediateBackend"' in settings
    assert f'"{stand_ins}.DummyBackend"' in settings
    assert f"from {stand_ins} import ImmediateBackend" in imports
    assert f"from {stand_ins} import DummyBackend" in imports
    # Only the set-up: the tests' own text is left as it was.
    assert 'assert "django.tasks.backends.immediate" != "left alone"' in imports
    assert (pristine / "test_settings.py").read_text() == SETTINGS
    assert (tmp_path / "run" / "pytest.ini").exists()


def test_a_set_up_no_longer_found_fails_the_adaptation(tmp_path: Path) -> None:
    pristine = _pristine(tmp_path, test_settings=SETTINGS)  # no imports to change
    with pytest.raises(SourceUnavailable, match="no longer contain") as raised:
        adapt(pristine, tmp_path / "run")
    assert SET_UP[2][0] in str(raised.value) and SET_UP[0][0] not in str(raised.value)


def test_every_deliberate_difference_has_a_reason() -> None:
    assert DIFFERENCES
    for key, difference in DIFFERENCES.items():
        assert key.count("::") == 2 and key.startswith("test_"), key
        assert len(difference.reason) > 40, key
