"""The built wheel, installed in a clean venv (no system site-packages, dependencies from
the package index), migrates, enqueues and claims one job: `venturi.sql` ships inside."""

from __future__ import annotations

import shutil
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.support import run_checked

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys

    import venturi
    from venturi.models import NewJob
    from venturi.settlements import Claim, Settlement
    from venturi.store.postgres import PostgresStore
    from venturi.prefix import Prefix

    dsn, prefix = sys.argv[1], sys.argv[2]
    assert "site-packages" in venturi.__file__, venturi.__file__
    store = PostgresStore.from_dsn(dsn, Prefix(prefix), pool_size=2)
    try:
        applied = store.migrate()
        job_id = store.enqueue(NewJob("wheel.job", {"x": 1}))
        [job] = store.claim("wheel-worker", {"wheel.job": 30}, 1)
        assert job.id == job_id and job.payload == {"x": 1}, job
        assert store.settle(Claim.of(job), Settlement.complete())
        print("applied", applied, "ran", job_id, "from", venturi.__file__)
    finally:
        store.close()
    """
)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_wheel_runs_a_job_from_a_clean_venv(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    # Build from a copy, so the build leaves no build/ or egg-info in the work tree.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("venturi", "sql"):
        shutil.copytree(
            ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    run_checked(
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--outdir",
        tmp_path / "dist",
        source,
        cwd=tmp_path,
    )
    [wheel] = (tmp_path / "dist").glob("venturi-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "venturi/py.typed",
        "venturi/sql/__init__.py",
        "venturi/sql/claim.sql",
        "venturi/sql/migrations/0001_initial.sql",
    ):
        assert expected in names, f"{expected} missing from {wheel.name}"

    venv = tmp_path / "venv"
    run_checked(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run_checked(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        wheel,
        cwd=tmp_path,
    )
    output = run_checked(python, "-c", SCRIPT, database_dsn, prefix, cwd=tmp_path, timeout=120)
    print(output.strip())
    assert "ran" in output and str(venv) in output
