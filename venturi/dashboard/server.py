"""The standalone dashboard server behind `venturi dashboard`: wsgiref's server with a
bounded number of connections, each dropped when its request does not arrive in time.

wsgiref alone starts a thread per connection with no limit and waits forever for a
request line, so a few hundred idle sockets (or one client sending a byte now and then)
hold the dashboard down. Here a connection beyond ``max_connections`` is answered 503
at once, and one whose request headers have not all arrived ``read_timeout`` seconds
after it was accepted is closed.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

logger = logging.getLogger("venturi.dashboard")

MAX_CONNECTIONS: Final = 64
READ_TIMEOUT: Final = 10.0
_BUSY_BODY: Final = b"the dashboard is serving too many connections: try again in a moment\n"
_BUSY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\n"
    b"Connection: close\r\n"
    b"Content-Length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY
)


class DashboardRequestHandler(WSGIRequestHandler):
    """wsgiref's handler with the server's read timeout on every receive, telling the
    server once a request's headers are in; a dropped or timed-out client ends quietly."""

    server: DashboardServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout)

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        # Headers cut short by the read deadline are no request to answer.
        return self.server.request_read(self.request) and parsed

    def handle(self) -> None:
        try:
            super().handle()
        except (TimeoutError, ConnectionError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        self.server.log(f"{self.address_string()} {format % args}")


class DashboardServer(WSGIServer):
    """Serves ``app`` on ``host``:``port`` (0: a free port), each connection in a thread
    of its own, at most ``max_connections`` at a time; ``log`` gets one line per
    request (by default the ``venturi.dashboard`` logger at debug level).

    Call `serve_forever` in one thread and `shutdown` from another; `server_close` frees
    the port.
    """

    daemon_threads = True
    # socketserver's default backlog of 5 leaves a burst of clients retrying their
    # connect for seconds before even the 503 can be sent.
    request_queue_size = 128

    def __init__(
        self,
        app: Callable[..., Any],
        host: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout: float = READ_TIMEOUT,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        if not read_timeout > 0:
            raise ValueError(f"read_timeout must be positive, got {read_timeout}")
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.log = log if log is not None else logger.debug
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._reading: dict[socket.socket, float] = {}
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host.strip("[]"), port), DashboardRequestHandler)
        self.set_app(app)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        with self._lock:
            self._reading[request] = time.monotonic() + self.read_timeout
        thread = threading.Thread(
            target=self._serve, args=(request, client_address), name="venturi-dashboard"
        )
        thread.daemon = True
        thread.start()

    def _serve(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._lock:
                self._reading.pop(request, None)
            self.shutdown_request(request)
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        """Answer 503 without a thread: the answer fits the socket's send buffer."""
        try:
            request.settimeout(1.0)
            request.sendall(_BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def request_read(self, request: socket.socket) -> bool:
        """The request's headers are in: no longer subject to the read deadline. False
        if the deadline had passed and the connection was closed."""
        with self._lock:
            return self._reading.pop(request, None) is not None

    def service_actions(self) -> None:
        # serve_forever calls this between polls (every half second): close the
        # connections whose request is still not in, so each slot is freed in time.
        now = time.monotonic()
        with self._lock:
            late = [sock for sock, deadline in self._reading.items() if deadline <= now]
            for sock in late:
                del self._reading[sock]
        for sock in late:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.exception("dashboard: serving %s failed", client_address)
