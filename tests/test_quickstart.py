"""The README's quickstart as a newcomer runs it: a fresh clone of this checkout's HEAD, a
venv for each Python the classifiers name that this machine has, the README's install
command, then its `venturi demo` with no PostgreSQL reachable, so the embedded one starts.

Slow (minutes: one install per interpreter), and bounded: every step has a timeout.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import run_checked

ROOT = Path(__file__).resolve().parents[1]
_QUICKSTART = re.compile(r"<!-- section: quickstart -->.*?```sh\n(?P<line>[^\n]+)\n", re.S)
_SUMMARY = re.compile(
    r"(?P<requested>\d+) enqueue requests became (?P<jobs>\d+) jobs "
    r"\(dedup merged (?P<merged>\d+)\); all (?P<finished>\d+) finished"
)
_PRINT_VERSION = "import sys; print('%d.%d' % sys.version_info[:2])"
# Variables through which a newcomer's shell could point the demo at a server.
_SERVER_VARIABLES = ("VENTURI_DSN", "PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE", "PGDATABASE")


def supported_versions() -> list[str]:
    """``3.N`` for each ``Programming Language :: Python :: 3.N`` classifier."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pattern = re.compile(r"Programming Language :: Python :: (3\.\d+)")
    found = (pattern.fullmatch(c) for c in project["classifiers"])
    return [m.group(1) for m in found if m]


def readme_commands() -> tuple[str, str]:
    """The quickstart's first line, ``<install> && venturi demo``, split in two."""
    match = _QUICKSTART.search((ROOT / "README.md").read_text())
    assert match, "README.md has no quickstart section with a sh block"
    install, _, demo = match.group("line").partition(" && ")
    assert "pip install" in install and demo.startswith("venturi demo"), match.group("line")
    return install, demo


def find_python(version: str) -> str | None:
    """A Python ``version`` interpreter: this one, a pyenv install, or one on PATH."""
    pyenv = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [
        sys.executable,
        *sorted(glob.glob(f"{pyenv}/versions/{version}.*/bin/python"), reverse=True),
        shutil.which(f"python{version}"),
    ]
    for candidate in filter(None, candidates):
        try:
            done = subprocess.run(
                [candidate, "-c", _PRINT_VERSION],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout.strip() == version:
            return candidate
    return None


def without_a_server() -> list[str]:
    """A command prefix that runs a program in a network namespace of its own, where
    127.0.0.1 has no server (its loopback is not even up): how a machine without
    PostgreSQL looks to the demo. Skips the test where namespaces are not allowed."""
    prefix = ["unshare", "--net"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-current-user"]
    try:
        probe = subprocess.run(
            [*prefix, "true"], check=False, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot hide this machine's PostgreSQL from the demo: {exc}")
    if probe.returncode != 0:
        pytest.skip(f"cannot hide this machine's PostgreSQL: unshare said {probe.stderr.strip()}")
    return prefix


def fresh_clone(destination: Path) -> Path:
    """A clone of this checkout at its committed HEAD (uncommitted edits are not in it)."""
    try:
        head = run_checked("git", "-C", ROOT, "rev-parse", "HEAD", cwd=ROOT, timeout=30).strip()
    except (AssertionError, OSError) as exc:
        pytest.skip(f"not a git checkout, nothing to clone: {exc}")
    run_checked("git", "clone", "-q", "--no-checkout", ROOT, destination, cwd=ROOT, timeout=120)
    run_checked("git", "-C", destination, "checkout", "--quiet", head, cwd=ROOT, timeout=60)
    return destination


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("version", supported_versions())
def test_the_readme_quickstart_runs_from_a_fresh_clone(version: str, tmp_path: Path) -> None:
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    install, demo = readme_commands()
    hide = without_a_server()
    clone = fresh_clone(tmp_path / "venturi")
    venv = tmp_path / "venv"
    run_checked(python, "-m", "venv", venv, cwd=clone, timeout=120)
    # What `source venv/bin/activate` does, for the README's shell commands.
    shell = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    run_checked("bash", "-c", install, cwd=clone, timeout=900, env=shell)
    assert run_checked(venv / "bin" / "python", "-c", _PRINT_VERSION, cwd=clone).strip() == version
    # libpq's default socket directory would still reach this machine's server through the
    # file system, so the demo's first guess (libpq's defaults) looks in an empty one.
    no_socket = tmp_path / "no-socket-here"
    no_socket.mkdir()
    quiet = {**dict.fromkeys(_SERVER_VARIABLES), "PGHOST": str(no_socket), **shell}
    output = run_checked(*hide, "bash", "-c", demo, cwd=clone, timeout=300, env=quiet)

    assert "venturi demo on an embedded throwaway PostgreSQL" in output, output
    summary = _SUMMARY.search(output)
    assert summary, f"no summary line in the demo's output:\n{output}"
    requested, jobs, merged, finished = (int(summary.group(k)) for k in _SUMMARY.groupindex)
    assert requested == jobs + merged and finished == jobs > 0, summary.group(0)
    print(f"Python {version}: {summary.group(0)}")
