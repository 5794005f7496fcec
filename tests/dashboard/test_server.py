"""The standalone dashboard server (`venturi.dashboard.server`): a bounded number of
connections, each dropped when its request does not arrive in time, and headers that
cannot be split."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import venturi
from tests.dashboard.conftest import csrf_token
from tests.dashboard.scene import Scene
from tests.support import wait_until
from venturi.dashboard import Dashboard
from venturi.dashboard.server import DashboardServer


@contextmanager
def running(server: DashboardServer) -> Iterator[int]:
    thread = threading.Thread(target=server.serve_forever, name="door-server", daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def raw(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """Send ``request`` and read the whole answer (the server closes each connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def get(port: int, path: str = "/", cookie: str = "") -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    if cookie:
        head += f"Cookie: {cookie}\r\n"
    return raw(port, (head + "\r\n").encode())


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def test_idle_connections_are_bounded_and_dropped(scene: Scene) -> None:
    app = Dashboard(scene.queue, allow_anonymous=True)
    server = DashboardServer(app, "127.0.0.1", 0, max_connections=4, read_timeout=1.0)
    before = threading.active_count()
    with running(server) as port:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(40)]
        try:
            # Beyond the cap a connection is answered at once, not given a thread.
            busy = get(port)
            assert status_of(busy) in (200, 503)
            assert threading.active_count() <= before + 1 + 4
            # Idle ones are dropped once their request has not arrived in time, so the
            # server serves again.
            for sock in idle:
                assert wait_until(lambda s=sock: closed_by_server(s), 30, what="a drop")  # type: ignore[misc]
            assert status_of(wait_until(lambda: _served(port), 30, what="a page")) == 200
            assert threading.active_count() <= before + 1 + 4
        finally:
            for sock in idle:
                sock.close()


def _served(port: int) -> bytes | None:
    answer = get(port)
    return answer if status_of(answer) == 200 else None


def test_a_slow_request_is_dropped(scene: Scene) -> None:
    """A client that sends its headers a byte at a time does not hold a connection
    beyond the read timeout."""
    app = Dashboard(scene.queue, allow_anonymous=True)
    server = DashboardServer(app, "127.0.0.1", 0, max_connections=4, read_timeout=1.0)
    with running(server) as port, socket.create_connection(("127.0.0.1", port), 30) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n")
        dropped = threading.Event()

        def dribble() -> None:
            try:
                while not dropped.wait(0.2):
                    sock.sendall(b"X")
            except OSError:
                dropped.set()

        sender = threading.Thread(target=dribble, daemon=True)
        sender.start()
        assert wait_until(lambda: closed_by_server(sock) or None, 30, what="the drop")
        dropped.set()
        sender.join(10)


def test_the_server_answers_503_beyond_the_cap(scene: Scene) -> None:
    app = Dashboard(scene.queue, allow_anonymous=True)
    server = DashboardServer(app, "127.0.0.1", 0, max_connections=2, read_timeout=30.0)
    with running(server) as port:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
        try:
            answer = wait_until(lambda: _busy(port), 30, what="a 503")
            assert b"Retry-After" in answer
        finally:
            for sock in idle:
                sock.close()


def _busy(port: int) -> bytes | None:
    answer = get(port)
    return answer if status_of(answer) == 503 else None


def test_a_nul_in_the_query_answers_400(scene: Scene) -> None:
    server = DashboardServer(Dashboard(scene.queue, allow_anonymous=True), "127.0.0.1", 0)
    with running(server) as port:
        answer = get(port, "/jobs?kind=a%00b")
    assert status_of(answer) == 400
    assert b"kind must not hold control characters" in answer


def test_a_prefix_without_tables_answers_503_saying_so(database_dsn: str, prefix: str) -> None:
    queue = venturi.Queue(database_dsn, prefix=prefix, pool_size=2)
    server = DashboardServer(Dashboard(queue, allow_anonymous=True), "127.0.0.1", 0)
    try:
        with running(server) as port:
            answer = get(port, "/")
    finally:
        queue.close()
    assert status_of(answer) == 503
    assert f"the prefix {prefix} has no tables: run `venturi migrate`".encode() in answer
    assert b"A server error occurred" not in answer


def test_a_next_with_a_line_break_does_not_split_the_response(scene: Scene) -> None:
    app = Dashboard(scene.queue, allow_anonymous=True)
    server = DashboardServer(app, "127.0.0.1", 0)
    with running(server) as port:
        page = get(port, "/kinds")
        cookie = _set_cookies(page)
        token = csrf_token_of(page)
        body = (
            f"csrf_token={token}&kind=mail&next=/x%0D%0ASet-Cookie:%20evil%3D1&next2=%0D%0A"
        ).encode()
        head = (
            f"POST /kinds/pause HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
            f"Cookie: {cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        answer = raw(port, head + body)
    assert status_of(answer) == 303
    headers = answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    assert b"Location: /" in headers
    assert not any(h.lower().startswith(b"set-cookie: evil") for h in headers)


def _set_cookies(answer: bytes) -> str:
    head = answer.split(b"\r\n\r\n", 1)[0].decode()
    found = [line.split(":", 1)[1].strip().split(";", 1)[0] for line in head.split("\r\n")[1:]
             if line.lower().startswith("set-cookie:")]  # fmt: skip
    return "; ".join(found)


def csrf_token_of(answer: bytes) -> str:
    class Page:
        text = answer.split(b"\r\n\r\n", 1)[1].decode()

    return csrf_token(Page())  # type: ignore[arg-type]
