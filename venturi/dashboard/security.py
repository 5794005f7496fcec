"""The dashboard's guards: the Host allow-list, CSRF tokens bound to a browser session,
the password check of the standalone server and the throttle that slows guessing it."""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final

import attrs

from venturi.dashboard.http import Request, host_name

CSRF_COOKIE: Final = "venturi_csrf"
CSRF_FIELD: Final = "csrf_token"
_SESSION_ID: Final = re.compile(r"[0-9a-f]{32}")
# Names that reach this machine only; a page whose own name rebinds to 127.0.0.1 still
# sends that name as Host, and is refused.
LOCAL_HOSTS: Final = ("localhost", "127.0.0.1", "[::1]", "::1")


class HostAllowList:
    """The host names a request may be addressed to: the local ones plus ``names``.

    A name matches itself with any port; ``.example.com`` also matches every
    subdomain; ``*`` matches any name (for a framework that checked the host already).
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        given = [host_name(str(n)) for n in names]
        self.any = "*" in given
        self.names = frozenset((*LOCAL_HOSTS, *(n for n in given if n and n != "*")))

    def allows(self, host: str) -> bool:
        if self.any:
            return True
        if not host:
            return False
        if host in self.names:
            return True
        return any(n.startswith(".") and (host.endswith(n) or host == n[1:]) for n in self.names)


class CsrfTokens:
    """Tokens a form sends back with each POST, bound to the browser's session.

    The session is a random id in a cookie (HttpOnly, SameSite=Strict); the token in
    each form is its HMAC under this process's key. A POST passes only if its form
    token is the HMAC of the session id its cookie carries: another site can neither
    read the token nor make one, and a token copied from one session fails in another.
    """

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_secret(cls, secret: str | bytes | None) -> CsrfTokens:
        """Tokens signed with a key derived from ``secret`` (the same in every process
        given it), or with a random key of this process's own when None."""
        if secret is None:
            return cls(secrets.token_bytes(32))
        raw = secret.encode() if isinstance(secret, str) else secret
        return cls(hashlib.sha256(b"venturi-dashboard-csrf:" + raw).digest())

    def token(self, session: str) -> str:
        """The form token of ``session``."""
        return hmac.new(self._key, b"session:" + session.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def _session(request: Request) -> str | None:
        current = request.cookies.get(CSRF_COOKIE, "")
        return current if _SESSION_ID.fullmatch(current) else None

    def session_for(self, request: Request) -> tuple[str, bool]:
        """The request's session id, and whether it is new (to be set as a cookie)."""
        current = self._session(request)
        return (current, False) if current is not None else (secrets.token_hex(16), True)

    def accepts(self, request: Request) -> bool:
        """True if the POST's form token is the one of the session its cookie names."""
        session = self._session(request)
        sent = request.form.get(CSRF_FIELD, "")
        return session is not None and hmac.compare_digest(self.token(session), sent)

    @staticmethod
    def cookie_header(session: str, path: str, secure: bool) -> tuple[str, str]:
        flags = "; Secure" if secure else ""
        return (
            "Set-Cookie",
            f"{CSRF_COOKIE}={session}; Path={path or '/'}; HttpOnly; SameSite=Strict{flags}",
        )


def password_matches(request: Request, password: str) -> bool:
    """True if the request's Basic credentials carry ``password`` (any user name)."""
    sent = request.basic_password()
    return sent is not None and hmac.compare_digest(sent.encode(), password.encode())


@attrs.define
class _Failures:
    count: int = 0
    blocked_until: float = 0.0


class LoginThrottle:
    """Slows password guessing, per client address: after ``free_failures`` wrong
    passwords in a row, each further one blocks that client for ``base_delay`` seconds,
    doubling up to ``max_delay``; a blocked client is answered 429 with ``Retry-After``
    (even with the right password) until the delay passed. A right password clears the
    client's count. At most ``max_clients`` addresses are remembered (the oldest go).

    Behind a reverse proxy every client shares the proxy's address: put the proxy's own
    rate limit in front instead, or accept that a guesser slows everyone. Thread-safe.
    """

    def __init__(
        self,
        *,
        free_failures: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if free_failures < 0:
            raise ValueError(f"free_failures must be at least 0, got {free_failures}")
        if not 0 < base_delay <= max_delay:
            raise ValueError(
                f"base_delay must be positive and at most max_delay, got {base_delay} "
                f"and {max_delay}"
            )
        if max_clients < 1:
            raise ValueError(f"max_clients must be at least 1, got {max_clients}")
        self.free_failures = free_failures
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_clients = max_clients
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, _Failures] = OrderedDict()

    def retry_after(self, client: str) -> int:
        """Whole seconds ``client`` must wait before its next try; 0 when it may try."""
        with self._lock:
            found = self._clients.get(client)
            left = 0.0 if found is None else found.blocked_until - self._clock()
        return math.ceil(left) if left > 0 else 0

    def failed(self, client: str) -> None:
        """Count a wrong password from ``client`` (blocking it once past the free ones)."""
        with self._lock:
            found = self._clients.pop(client, None) or _Failures()
            found.count += 1
            beyond = found.count - self.free_failures
            if beyond > 0:
                delay = min(self.max_delay, self.base_delay * 2 ** min(beyond - 1, 32))
                found.blocked_until = self._clock() + delay
            self._clients[client] = found
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """Forget ``client``'s failures."""
        with self._lock:
            self._clients.pop(client, None)
