"""The HTTP server behind ``metrics_port``: a registry's metrics at ``/metrics`` (404
for any other path, which reads nothing), on 127.0.0.1 unless told another address.
Imported through `venturi.metrics`, which checks that prometheus-client is installed."""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from venturi.errors import ConfigurationError

logger = logging.getLogger("venturi.metrics")

# Only this machine by default: the gauges name every kind and how much work is queued.
DEFAULT_HOST: Final = "127.0.0.1"


def _metrics_only(app: Callable[..., Any]) -> Callable[..., Any]:
    """``app`` at ``/metrics``; 404 for every other path (which reads nothing)."""

    def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"metrics are served at /metrics\n"]
        result: Iterable[bytes] = app(environ, start_response)
        return result

    return route


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


def _server_class(addr: str) -> type[WSGIServer]:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET

    class Server(socketserver.ThreadingMixIn, WSGIServer):
        address_family = family
        daemon_threads = True

    return Server


class MetricsServer:
    """An HTTP server for ``registry`` at ``/metrics`` on ``addr``:``port``, stoppable.
    ``addr`` defaults to 127.0.0.1 (this machine only); "0.0.0.0" answers every
    interface."""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str = DEFAULT_HOST) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigurationError(f"metrics_port must be an int within [0, 65535], got {port!r}")
        app = _metrics_only(make_wsgi_app(registry))
        try:
            self._server = make_server(
                addr.strip("[]"), port, app, _server_class(addr), handler_class=_Handler
            )
        except OSError as exc:
            raise ConfigurationError(
                f"metrics_port {port}: cannot listen on {addr}:{port} ({exc.strerror or exc})"
            ) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="venturi-metrics", daemon=True
        )
        self._thread.start()
        self._lock = threading.Lock()
        self._closed = False
        logger.info("metrics served at http://%s:%d/metrics", addr, self.port)

    @property
    def port(self) -> int:
        """The port listened on (the one the OS chose, for port 0)."""
        return int(self._server.server_port)

    @property
    def host(self) -> str:
        """The address listened on."""
        return str(self._server.server_address[0])

    def close(self) -> None:
        """Stop serving and free the port; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
