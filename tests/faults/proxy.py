"""A TCP proxy that can silently blackhole the connections passing through it.

`blackhole` freezes every connection open at that moment: the proxy stops reading from
both ends and never closes them, so the client's kernel still gets its data ACKed (by
the proxy's) and TCP keepalives still answer; nothing reaches the server and nothing
comes back. That is the silent loss a stuck middlebox causes, which only an
application-level ping with a deadline can notice. Connections opened afterwards pass
through normally, as a reconnect would in real life.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class _Pair:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.frozen = threading.Event()
        self.closed = threading.Event()

    def pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self.closed.is_set():
                ready, _, _ = select.select([source], [], [], 0.1)
                if not ready or self.frozen.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        if not self.frozen.is_set():
            self.close()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.close()


class BlackholeProxy:
    """Listens on 127.0.0.1 (``port``) and forwards to ``target``; see the module doc."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.1)
        self.port: int = self._server.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=pair.pump, args=(source, sink), daemon=True).start()

    def blackhole(self) -> int:
        """Freeze every open connection; returns how many were frozen."""
        with self._lock:
            live = [p for p in self._pairs if not p.closed.is_set()]
        for pair in live:
            pair.frozen.set()
        return len(live)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.close()
        self._thread.join(5)
