"""Just enough HTTP over WSGI for the dashboard: a parsed request and a response."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import parse_qs, quote

import attrs

StartResponse = Callable[..., Any]
# A form bigger than this is no dashboard form: refuse it rather than read it.
MAX_FORM_BYTES: Final = 64 * 1024
# C0 controls, space and DEL: never part of a value a page of the dashboard sends.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class BadRequest(ValueError):
    """A request the dashboard refuses with 400: the message names the field and rule."""


def refuse_controls(field: str, value: str) -> str:
    """``value`` if it holds no control character; `BadRequest` naming ``field`` else."""
    if _CONTROL.search(value):
        raise BadRequest(f"{field} must not hold control characters (such as NUL or a line break)")
    return value


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

    @property
    def host(self) -> str:
        """The host name the client asked for (``Host``; the server's own name when a
        request carries none), lower case and without its port; brackets kept around an
        IPv6 address."""
        if "HTTP_HOST" in self.environ:
            return host_name(str(self.environ["HTTP_HOST"]))
        return host_name(str(self.environ.get("SERVER_NAME", "")))

    @property
    def client(self) -> str:
        """The client's address, as the WSGI server saw it."""
        return str(self.environ.get("REMOTE_ADDR", ""))

    def is_https(self, trust_forwarded_proto: bool = False) -> bool:
        """True if the browser reached this request over HTTPS: the WSGI scheme, or the
        proxy's ``X-Forwarded-Proto`` when it is trusted."""
        if self.environ.get("wsgi.url_scheme") == "https":
            return True
        forwarded = self.header("X-Forwarded-Proto").split(",")[0].strip().lower()
        return trust_forwarded_proto and forwarded == "https"

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


def host_name(raw: str) -> str:
    """``raw`` (a ``Host`` header or a configured name) lower case, without its port."""
    raw = raw.strip().lower()
    if raw.startswith("["):
        end = raw.find("]")
        return raw[: end + 1] if end > 0 else raw
    name, colon, port = raw.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else raw


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
        for name, value in headers:
            # A header carrying a line break would split the response.
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} holds a line break")
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
