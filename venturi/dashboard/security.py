"""The dashboard's guards: CSRF tokens (a signed double-submit cookie) and the password
check of the standalone server."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from venturi.dashboard.http import Request

CSRF_COOKIE: Final = "venturi_csrf"
CSRF_FIELD: Final = "csrf_token"


class CsrfTokens:
    """Tokens a form sends back with each POST: a random nonce signed with this process's
    key, kept in a cookie (SameSite=Strict) and in the form. A POST is accepted only if
    both carry the same validly signed token, which another site can neither read nor
    make."""

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

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()

    def new(self) -> str:
        nonce = secrets.token_hex(16)
        return f"{nonce}.{self._sign(nonce)}"

    def valid(self, token: str) -> bool:
        nonce, _, signature = token.partition(".")
        return bool(nonce) and hmac.compare_digest(signature, self._sign(nonce))

    def token_for(self, request: Request) -> tuple[str, bool]:
        """The request's token, and whether it is new (to be set as a cookie)."""
        current = request.cookies.get(CSRF_COOKIE, "")
        if self.valid(current):
            return current, False
        return self.new(), True

    def accepts(self, request: Request) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        sent = request.form.get(CSRF_FIELD, "")
        return self.valid(cookie) and hmac.compare_digest(cookie, sent)

    @staticmethod
    def cookie_header(token: str, path: str) -> tuple[str, str]:
        return (
            "Set-Cookie",
            f"{CSRF_COOKIE}={token}; Path={path or '/'}; HttpOnly; SameSite=Strict",
        )


def password_matches(request: Request, password: str) -> bool:
    """True if the request's Basic credentials carry ``password`` (any user name)."""
    sent = request.basic_password()
    return sent is not None and hmac.compare_digest(sent.encode(), password.encode())
