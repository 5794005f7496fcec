"""Fixtures for driving the `venturi` command: an in-process runner bound to this test's
prefix, a migrated queue with a few handlers, and helpers for subprocess workers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

import venturi
from venturi.cli.main import build_cli

CLOSED_PORT_DSN = "postgresql://postgres:topsecret@127.0.0.1:1/none?connect_timeout=2"


class Invoke(Protocol):
    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str | None] | None = None
    ) -> Result: ...


@pytest.fixture
def invoke(database_dsn: str, prefix: str) -> Invoke:
    """Run `venturi ARGS` in this process against this test's prefix."""
    runner = CliRunner()
    cli = build_cli()

    def run(
        *args: str, input: str | None = None, env: dict[str, str | None] | None = None
    ) -> Result:
        full_env: dict[str, str | None] = {
            "VENTURI_DSN": database_dsn,
            "VENTURI_PREFIX": prefix,
            **(env or {}),
        }
        return runner.invoke(cli, list(args), input=input, env=full_env, catch_exceptions=False)

    return run


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[venturi.Queue]:
    """A migrated queue with kinds `ok` (returns n), `bad` (poison) and `flaky` (fails
    while its payload says so)."""
    q = venturi.Queue(database_dsn, prefix=prefix, pool_size=4)
    q.migrate()

    @q.job("ok", lease=5)
    def ok(n: int) -> int:
        return n

    @q.job("bad", max_attempts=1)
    def bad(n: int) -> None:
        raise venturi.Fail(f"poison {n}")

    @q.job("flaky", max_attempts=3, backoff=venturi.constant(0))
    def flaky(fail: bool) -> None:
        if fail:
            raise RuntimeError("flaky failure")

    yield q
    q.close()


def one_error_line(result: Result) -> str:
    """The single line a failed command printed; fails if it printed more (or a trace)."""
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {result.output!r}"
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# The sample names a metric family may serve (a counter `x` serves `x_total`, ...).
_SAMPLE_SUFFIXES = ("", "_total", "_created", "_count", "_sum", "_bucket", "_info")


class Samples(dict[tuple[str, tuple[tuple[str, str], ...]], float]):
    """Every sample of one scrape, and every sample name its metric families declare
    (a labelled counter that never counted declares its family with no samples)."""

    declared: frozenset[str] = frozenset()


def scrape(port: int) -> Samples:
    """Every sample served at http://127.0.0.1:PORT/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = Samples()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in _SAMPLE_SUFFIXES)
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    samples.declared = frozenset(names)
    return samples


def sample(samples: Samples, name: str, **labels: str) -> float:
    """One series' value; 0.0 for a label set not counted yet. A metric the scrape does
    not declare, or labels its other series do not carry, fail: a renamed metric or
    label must not read as zero."""
    key = (name, tuple(sorted(labels.items())))
    if key in samples:
        return samples[key]
    assert name in samples.declared, f"the scrape declares no metric {name!r}"
    shapes = {tuple(k for k, _ in labelled) for series, labelled in samples if series == name}
    assert not shapes or tuple(sorted(labels)) in shapes, f"{name} has labels {shapes}"
    return 0.0


def settled_total(samples: Samples) -> float:
    """Settled runs counted over every kind and outcome."""
    return sum(v for (name, _), v in samples.items() if name == "venturi_jobs_settled_total")


def start_cli_process(
    args: list[str], cwd: Path, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """`venturi ARGS` in a child process (for signals), its output in ``log``. The child
    takes SIGINT as a terminal's Ctrl-C even when this run ignores it (a shell starts a
    background job so, and Python raises KeyboardInterrupt only for a SIGINT that was
    not ignored at its start)."""
    code = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from venturi.cli import main; main()"
    )
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def answers(fetch: Callable[[], Any]) -> Any:
    """``fetch()``, or None while it cannot connect yet."""
    try:
        return fetch()
    except OSError:
        return None
