"""What a user installs: the sdist and wheel built from a fresh clone of this checkout's
HEAD, checked (twine, the same wheel either way, every module and the license inside),
then the wheel installed, not editable, with its extras in a new venv for each Python the
classifiers name, and run from a directory outside the clone: every command's --help,
every module imported, the embedded demo with no server reachable, a migration, one job
run by `venturi worker`, the healthcheck, and the pytest plugin.

Slow (minutes: one build, one install per interpreter, made side by side), and bounded:
every step has a timeout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest

from tests.support import run_checked, wait_until
from tests.support.packaging import (
    build,
    checkout_files,
    unexplained_import_failures,
    wheel_contents,
    wheel_differences,
    wheel_names,
)
from tests.test_quickstart import find_python, fresh_clone, supported_versions, without_a_server
from venturi.client import Queue
from venturi.models import JobStatus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Every extra a user may ask for, so every module has its dependencies and must import.
EXTRAS = "embedded,metrics,dashboard,flask,django,otel"
# Modules that import only where a dependency no extra can bring exists, with that
# dependency: their absence of it is the one failure excused.
OPTIONAL_IMPORTS = {
    # Django's Tasks framework is Django 6's, which needs Python >= 3.12: on 3.11 the
    # django extra brings Django 5.2.
    "venturi.contrib.django.tasks": "django.tasks",
    "venturi.contrib.django.task_results": "django.tasks",
}
_SERVER_VARIABLES = ("VENTURI_DSN", "PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE", "PGDATABASE")

COMMANDS = textwrap.dedent(
    """
    import json

    import click

    from venturi.cli import build_cli

    def walk(command, path):
        yield path
        if isinstance(command, click.Group):
            context = click.Context(command)
            for name in command.list_commands(context):
                yield from walk(command.get_command(context, name), [*path, name])

    print(json.dumps(list(walk(build_cli(), []))))
    """
)
IMPORTS = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys

    import venturi

    failures = {}

    def failed(name):
        error = sys.exc_info()[1]
        failures[name] = [type(error).__name__, getattr(error, "name", None)]

    modules = ["venturi"]
    modules += [m.name for m in pkgutil.walk_packages(venturi.__path__, "venturi.", failed)]
    for name in modules:
        if name.rpartition(".")[2] == "__main__":
            continue  # runs a command: the test runs it with python -m instead
        try:
            importlib.import_module(name)
        except Exception:
            failed(name)
    print(json.dumps({"file": venturi.__file__, "modules": modules, "failures": failures}))
    """
)
APP = textwrap.dedent(
    """
    import os

    import venturi

    queue = venturi.Queue(dsn=os.environ["VENTURI_DSN"], prefix=os.environ["VENTURI_PREFIX"])


    @queue.job("installed.shout")
    def shout(word: str) -> str:
        return word.upper()
    """
)
PLUGIN_TEST = textwrap.dedent(
    """
    def test_a_queue_from_the_plugin(venturi_queue):
        queue = venturi_queue()

        @queue.job("installed.add")
        def add(a: int, b: int) -> int:
            return a + b

        job_id = add.enqueue(a=2, b=3)
        assert queue.drain() == 1
        assert queue.get(job_id).status == "completed"
    """
)


@attrs.frozen
class Built:
    """The fresh clone and what `python -m build` made from it."""

    clone: Path
    sdist: Path
    wheel: Path  # built from the sdist, as pip builds one from an sdist
    direct_wheel: Path  # built from the clone's tree


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("build")
    clone = fresh_clone(base / "venturi")
    made = build(clone, base / "dist")
    [sdist] = [p for p in made if p.name.endswith(".tar.gz")]
    [wheel] = [p for p in made if p.suffix == ".whl"]
    [direct_wheel] = build(clone, base / "direct", "--wheel")
    return Built(clone, sdist, wheel, direct_wheel)


@pytest.fixture(scope="module")
def venvs(built: Built, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """For each supported Python, a venv with the wheel and every extra installed (or why
    there is none); made side by side, since installing is mostly waiting."""
    base = tmp_path_factory.mktemp("venvs")

    def make(version: str) -> Path | str:
        python = find_python(version)
        if python is None:
            return f"no Python {version} on this machine"
        venv = base / f"py{version}"
        run_checked(python, "-m", "venv", venv, cwd=base, timeout=120)
        pip = (venv / "bin" / "python", "-m", "pip", "install", "--quiet")
        run_checked(*pip, f"{built.wheel}[{EXTRAS}]", "pytest", cwd=base, timeout=900)
        return venv

    versions = supported_versions()
    with ThreadPoolExecutor(len(versions)) as pool:
        return dict(zip(versions, pool.map(make, versions), strict=True))


@pytest.fixture
def venv(venvs: dict[str, Path | str], version: str) -> Path:
    made = venvs[version]
    if isinstance(made, str):
        pytest.skip(made)
    return made


@pytest.fixture
def outside(tmp_path: Path, built: Built) -> Path:
    """A working directory outside the clone, so only the installed package is importable."""
    assert built.clone not in tmp_path.parents
    return tmp_path


def test_twine_passes_the_sdist_and_the_wheel(built: Built) -> None:
    output = run_checked(
        sys.executable,
        "-m",
        "twine",
        "check",
        "--strict",
        built.sdist,
        built.wheel,
        cwd=built.clone,
    )
    assert output.count("PASSED") == 2, output


def test_the_sdist_builds_the_wheel_the_tree_builds(built: Built) -> None:
    from_sdist, from_tree = wheel_contents(built.wheel), wheel_contents(built.direct_wheel)
    assert sorted(from_sdist) == sorted(from_tree)
    assert [n for n in from_sdist if from_sdist[n] != from_tree[n]] == []


def test_the_wheel_holds_the_license_and_every_file_of_the_package(built: Built) -> None:
    names = wheel_names(built.wheel)
    assert wheel_differences(checkout_files(built.clone), names) == []
    assert [n for n in names if n.endswith(".dist-info/licenses/LICENSE")], names


def _in(venv: Path, program: str) -> Path:
    return venv / "bin" / program


@pytest.mark.parametrize("version", supported_versions())
def test_every_command_answers_help(venv: Path, outside: Path) -> None:
    paths: list[list[str]] = json.loads(
        run_checked(_in(venv, "python"), "-c", COMMANDS, cwd=outside, timeout=120)
    )
    assert ["worker"] in paths and ["bench"] in paths, paths

    def usage(path: list[str]) -> str:
        return run_checked(_in(venv, "venturi"), *path, "--help", cwd=outside, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        for path, output in zip(paths, pool.map(usage, paths), strict=True):
            assert output.startswith(f"Usage: {' '.join(['venturi', *path])} "), output
    via_module = run_checked(_in(venv, "python"), "-m", "venturi", "--help", cwd=outside)
    assert via_module.startswith("Usage: "), via_module


@pytest.mark.parametrize("version", supported_versions())
def test_every_module_of_the_package_imports(venv: Path, outside: Path, built: Built) -> None:
    found = json.loads(run_checked(_in(venv, "python"), "-c", IMPORTS, cwd=outside))
    assert Path(found["file"]).is_relative_to(venv), found["file"]
    modules = set(found["modules"])
    assert modules == _modules_of(checkout_files(built.clone))
    assert set(OPTIONAL_IMPORTS) <= modules, "OPTIONAL_IMPORTS names a module that is gone"
    failures = {name: (error, missing) for name, (error, missing) in found["failures"].items()}
    assert unexplained_import_failures(failures, OPTIONAL_IMPORTS) == []
    for name in sorted(m for m in modules if m.endswith(".__main__")):
        package = name.removesuffix(".__main__")
        run_checked(_in(venv, "python"), "-m", package, "--help", cwd=outside, timeout=120)


def _modules_of(files: set[str]) -> set[str]:
    """Module names of the ``.py`` files among a wheel's paths."""
    modules = set()
    for path in files:
        if path.endswith(".py"):
            module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            modules.add(module)
    return modules


@pytest.mark.parametrize("version", supported_versions())
def test_the_embedded_demo_runs_with_no_server_reachable(venv: Path, outside: Path) -> None:
    hide = without_a_server()
    quiet = dict.fromkeys(_SERVER_VARIABLES)
    output = run_checked(
        *hide,
        _in(venv, "venturi"),
        "demo",
        "--embedded",
        cwd=outside,
        timeout=300,
        env=quiet,
    )
    assert "venturi demo on an embedded throwaway PostgreSQL" in output, output
    finished = re.search(r"all (\d+) finished", output)
    assert finished and int(finished.group(1)) > 0, output


@pytest.fixture
def worker_process() -> Iterator[list[subprocess.Popen[str]]]:
    """Started worker processes, killed after the test if they are still running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def _status(queue: Queue, job_id: str) -> JobStatus | None:
    job = queue.get(job_id)
    return None if job is None else job.status


@pytest.mark.parametrize("version", supported_versions())
def test_migrate_a_worker_running_a_job_and_the_healthcheck(
    venv: Path,
    outside: Path,
    database_dsn: str,
    prefix: str,
    worker_process: list[subprocess.Popen[str]],
) -> None:
    env = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}
    migrated = run_checked(_in(venv, "venturi"), "migrate", cwd=outside, timeout=120, env=env)
    print(migrated.strip())
    healthy = run_checked(_in(venv, "venturi"), "healthcheck", cwd=outside, timeout=120, env=env)
    assert "FAIL" not in healthy, healthy
    (outside / "installed_app.py").write_text(APP)
    enqueue = "from installed_app import shout; print(shout.enqueue(word='hello'))"
    job_id = run_checked(_in(venv, "python"), "-c", enqueue, cwd=outside, env=env).strip()

    log = (outside / "worker.log").open("w")
    worker = subprocess.Popen(
        [_in(venv, "venturi"), "worker", "--app", "installed_app:queue", "--concurrency", "1"],
        cwd=outside,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker_process.append(worker)
    queue = Queue(dsn=database_dsn, prefix=prefix)
    try:
        wait_until(
            lambda: _status(queue, job_id) == JobStatus.COMPLETED,
            timeout=120,
            what="the installed worker to complete the job",
        )
        assert [r.attachment for r in queue.journal(job_id)][-1] == "HELLO"
    finally:
        queue.close()
        worker.send_signal(signal.SIGTERM)
        status = worker.wait(timeout=90)
        log.close()
    assert status == 0, (outside / "worker.log").read_text()


@pytest.mark.parametrize("version", supported_versions())
def test_the_pytest_plugin_loads_from_its_entry_point(
    venv: Path, outside: Path, database_dsn: str
) -> None:
    (outside / "test_plugin.py").write_text(PLUGIN_TEST)
    output = run_checked(
        _in(venv, "python"),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "test_plugin.py",
        cwd=outside,
        timeout=300,
        env={"VENTURI_TEST_DSN": database_dsn},
    )
    assert "1 passed" in output, output
