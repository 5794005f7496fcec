"""TLS: a private server with ssl=on and a certificate made here; venturi's pool and its
LISTEN connection both use the DSN's TLS settings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import venturi
from tests.faults.certs import Authority
from tests.faults.scenario import Watch, ledger_queue, start_latency
from tests.faults.server import ThrowawayServer
from tests.support import postgres_store, wait_until
from venturi.store.notifier import PostgresNotifier


@pytest.fixture(scope="module")
def tls_server(own_server_session: ThrowawayServer) -> Iterator[tuple[ThrowawayServer, Path]]:
    """The private server with ssl=on (off again afterwards); yields it and its CA file."""
    server = own_server_session
    if not server.ssl_capable:
        pytest.skip("these PostgreSQL binaries were built without OpenSSL")
    server.ensure_running()
    tls = server.root / "tls"
    tls.mkdir(exist_ok=True)
    authority = Authority("venturi test CA")
    cert, key = authority.server(tls)
    server.own_file(cert, 0o644)
    server.own_file(key, 0o600)
    server.write_conf({"ssl": "on", "ssl_cert_file": f"'{cert}'", "ssl_key_file": f"'{key}'"})
    server.reload()
    yield server, authority.write(tls / "ca.crt")
    server.write_conf({"ssl": "off"})
    server.reload()


def _ssl_in_use(watch: Watch, pid: int) -> bool:
    rows = watch.rows("SELECT ssl FROM pg_stat_ssl WHERE pid = %s", (pid,))
    return bool(rows and rows[0][0])


@pytest.mark.parametrize("mode", ["require", "verify-full"])
def test_tls_covers_enqueue_claims_and_listen(
    tls_server: tuple[ThrowawayServer, Path], own_prefix: str, mode: str
) -> None:
    server, ca = tls_server
    options = f"sslmode={mode}" + (f"&sslrootcert={ca}" if mode == "verify-full" else "")
    dsn = f"{server.dsn}?{options}"
    queue, book = ledger_queue(dsn, own_prefix)
    watch = Watch(server.dsn, own_prefix)
    with queue.worker(concurrency=2, poll_interval=30) as worker:
        wait_until(lambda: worker.listening, 30, what="the self-probe NOTIFY over TLS")
        latency = start_latency(queue, watch)  # an enqueue, its NOTIFY, a claim
        notifier = worker.notifier
        assert isinstance(notifier, PostgresNotifier)
        listener = notifier.backend_pid()
        assert listener is not None
        with postgres_store(queue).connection() as conn:
            over_tls = _ssl_in_use(watch, listener), _ssl_in_use(watch, conn.info.backend_pid)
    queue.close()
    book.close()
    watch.close()
    print(
        f"\nTLS sslmode={mode}: a job started {latency:.3f}s after enqueue (woken by NOTIFY; "
        f"poll interval 30s); LISTEN connection over TLS {over_tls[0]}, pooled {over_tls[1]}"
    )
    assert over_tls == (True, True)
    assert latency < 15


def test_verify_full_against_the_wrong_ca_fails_clearly(
    tls_server: tuple[ThrowawayServer, Path], own_prefix: str, tmp_path: Path
) -> None:
    server, _ = tls_server
    wrong = Authority("some other CA").write(tmp_path / "wrong-ca.crt")
    dsn = f"{server.dsn}?sslmode=verify-full&sslrootcert={wrong}"
    began = time.monotonic()
    with (
        venturi.Queue(dsn, prefix=own_prefix, pool_timeout=3) as queue,
        pytest.raises(venturi.StoreUnavailable) as refused,
    ):
        queue.migrate()
    took = time.monotonic() - began
    message = str(refused.value)
    print(f"\nverify-full against the wrong CA: StoreUnavailable after {took:.1f}s: {message}")
    assert "certificate verify failed" in message
    with pytest.raises(psycopg.OperationalError) as direct:
        psycopg.connect(dsn, connect_timeout=3)
    assert "certificate verify failed" in str(direct.value)
