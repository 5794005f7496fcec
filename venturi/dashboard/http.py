"""Just enough HTTP over WSGI for the dashboard: a parsed request and a response."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import parse_qs, quote

import attrs

StartResponse = Callable[..., Any]
# A form bigger than this is no dashboard form: refuse it rather than read it.
MAX_FORM_BYTES: Final = 64 * 1024


def _first(values: dict[str, list[str]]) -> dict[str, str]:
    return {key: items[0] for key, items in values.items() if items}


@attrs.frozen
class Request:
    """One request: method, the path below the dashboard's mount point, the mount point
    itself (``root``), query and form fields, cookies and the raw environ."""

    method: str
    path: str
    root: str
    query: dict[str, str]
    form: dict[str, str]
    cookies: dict[str, str]
    environ: dict[str, Any]

    @classmethod
    def from_environ(cls, environ: dict[str, Any]) -> Request:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        form: dict[str, str] = {}
        if method == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if 0 < length <= MAX_FORM_BYTES:
                body = environ["wsgi.input"].read(length).decode("utf-8", "replace")
                form = _first(parse_qs(body, keep_blank_values=True))
        query = _first(parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True))
        cookies: dict[str, str] = {}
        for part in str(environ.get("HTTP_COOKIE", "")).split(";"):
            name, _, value = part.strip().partition("=")
            if name:
                cookies[name] = value
        return cls(
            method=method,
            path=str(environ.get("PATH_INFO", "")) or "/",
            root=str(environ.get("SCRIPT_NAME", "")).rstrip("/"),
            query=query,
            form=form,
            cookies=cookies,
            environ=environ,
        )

    def header(self, name: str) -> str:
        return str(self.environ.get("HTTP_" + name.upper().replace("-", "_"), ""))

    def basic_password(self) -> str | None:
        """The password of a Basic ``Authorization`` header, or None."""
        scheme, _, encoded = self.header("Authorization").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]

    def url(self, path: str, **params: str | None) -> str:
        """``path`` under the mount point, with the non-empty ``params`` as its query."""
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v)
        return self.root + path + (f"?{query}" if query else "")


@attrs.define
class Response:
    """A response to hand to WSGI's ``start_response``."""

    body: bytes = b""
    status: HTTPStatus = HTTPStatus.OK
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = attrs.field(factory=list)

    def __call__(self, start_response: StartResponse) -> Iterable[bytes]:
        headers = [
            ("Content-Type", self.content_type),
            ("Content-Length", str(len(self.body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "same-origin"),
            (
                "Content-Security-Policy",
                "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                "script-src 'self'; form-action 'self'; frame-ancestors 'none'",
            ),
            *self.headers,
        ]
        start_response(f"{self.status.value} {self.status.phrase}", headers)
        return [self.body]


def redirect(location: str) -> Response:
    """303 See Other: after a POST, the browser GETs ``location``."""
    return Response(status=HTTPStatus.SEE_OTHER, headers=[("Location", location)])


def plain(status: HTTPStatus, text: str, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(text.encode(), status, "text/plain; charset=utf-8", headers=list(headers or []))


def call_mounted(
    app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]],
    environ: dict[str, Any],
    mount: str,
    rest: str,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run ``app`` for a framework's request, as mounted at ``mount`` with ``rest`` the
    path below it: (status code, headers, body), for the framework's own response."""
    inner = {**environ, "SCRIPT_NAME": mount.rstrip("/"), "PATH_INFO": "/" + rest.lstrip("/")}
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
        started.extend([int(status.split(" ", 1)[0]), headers])

    body = b"".join(app(inner, start_response))
    return started[0], started[1], body
