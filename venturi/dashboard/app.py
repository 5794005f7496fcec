"""`Dashboard`: the WSGI application. Routes each request to a page or an action, and
guards actions (CSRF, read-only mode) and every request (Host, password, ``authorize``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from http import HTTPStatus
from importlib import resources
from typing import Any, Final
from urllib.parse import quote, unquote

import jinja2
from psycopg.errors import UndefinedTable

from venturi.client import Queue
from venturi.dashboard import actions, pages
from venturi.dashboard.http import (
    BadRequest,
    Request,
    Response,
    StartResponse,
    plain,
    redirect,
)
from venturi.dashboard.security import (
    CSRF_FIELD,
    CsrfTokens,
    HostAllowList,
    LoginThrottle,
    password_matches,
)
from venturi.errors import InvalidJob, SchemaError, StoreUnavailable, VenturiError

logger = logging.getLogger("venturi.dashboard")

Authorize = Callable[[dict[str, Any]], bool]
NOTICE_COOKIE: Final = "venturi_notice"
_STATIC: Final = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}
_JOB: Final = re.compile(r"/jobs/([0-9A-Za-z-]{26,36})")
_JOB_ACTION: Final = re.compile(r"/jobs/([0-9A-Za-z-]{26,36})/(cancel|requeue|retry)")
_KIND_ACTION: Final = re.compile(r"/kinds/(pause|resume)")
_SIGNAL_ACTION: Final = re.compile(r"/jobs/([0-9A-Za-z-]{26,36})/signal")
_WORKFLOW: Final = re.compile(r"/workflows/([0-9A-Za-z-]{26,36})")
# A same-origin path: one slash, then no slash or backslash; no space, control
# character or backslash anywhere (browsers drop tabs and line breaks, so "/\t/host"
# would become "//host", another site).
_LOCAL_PATH: Final = re.compile(r"/(?![/\\])[^\s\x00-\x1f\x7f\\]*")


UNREACHABLE: Final = "the database is unreachable: the dashboard shows again once it answers"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("venturi.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


class Dashboard:
    """The venturi dashboard as a WSGI application over ``queue``.

    Mount it anywhere (it reads its mount point from ``SCRIPT_NAME``). ``read_only``
    shows every page and refuses every action. ``password``: every request must carry
    it as HTTP Basic credentials (any user name); wrong ones are slowed by
    ``login_throttle`` (a `LoginThrottle` by default). ``authorize``: called with each
    request's WSGI environ; False answers 403 (the Flask mount passes its callback here;
    the Django view checks Django's users before calling the dashboard). Without
    either, anyone who reaches the dashboard reads every job and acts on it: it logs a
    warning when it is made, unless ``allow_anonymous`` says that is meant (a server in
    front that authenticates).

    ``allowed_hosts``: the host names (``Host`` header, any port) served besides
    ``localhost``, ``127.0.0.1`` and ``[::1]``; ``.example.com`` takes its subdomains
    too, ``*`` any name. Any other answers 400, so a page whose name rebinds to this
    machine cannot read the dashboard.

    ``secret`` signs the CSRF tokens: give the application's secret key when several
    processes serve the dashboard (a token made by one must pass in another); by
    default each process makes its own. Its cookies are ``Secure`` when the request
    came over HTTPS (``wsgi.url_scheme``; a proxy's ``X-Forwarded-Proto`` only with
    ``trust_forwarded_proto``), and always with ``secure_cookies``. Thread-safe.
    """

    def __init__(
        self,
        queue: Queue,
        *,
        read_only: bool = False,
        password: str | None = None,
        authorize: Authorize | None = None,
        refresh_seconds: float = 5.0,
        page_size: int = pages.PAGE_SIZE,
        secret: str | bytes | None = None,
        allowed_hosts: Iterable[str] = (),
        secure_cookies: bool = False,
        trust_forwarded_proto: bool = False,
        login_throttle: LoginThrottle | None = None,
        allow_anonymous: bool = False,
    ) -> None:
        if refresh_seconds <= 0:
            raise ValueError(f"refresh_seconds must be positive, got {refresh_seconds}")
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        if password is not None and not password:
            raise ValueError("password must not be empty (leave it None for no password)")
        self.queue = queue
        self.read_only = read_only
        self.password = password
        self.authorize = authorize
        self.refresh_seconds = refresh_seconds
        self.page_size = page_size
        self.csrf = CsrfTokens.from_secret(secret)
        self.hosts = HostAllowList(allowed_hosts)
        self.secure_cookies = secure_cookies
        self.trust_forwarded_proto = trust_forwarded_proto
        self.login_throttle = login_throttle if login_throttle is not None else LoginThrottle()
        self.templates = _environment()
        if password is None and authorize is None and not allow_anonymous:
            logger.warning(
                "the venturi dashboard has no password and no authorize hook: whoever "
                "reaches it reads every job and can act on them; pass password= or "
                "authorize=, mount it behind the application's login (Flask, Django), "
                "or pass allow_anonymous=True if a server in front authenticates"
            )

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = Request.from_environ(environ)
        return self.respond(request)(start_response)

    def respond(self, request: Request) -> Response:
        """The response to ``request``: a page, an action's redirect, or a refusal."""
        if not self.hosts.allows(request.host):
            return plain(
                HTTPStatus.BAD_REQUEST,
                f"host name {request.host!r} is not allowed: name it in allowed_hosts "
                "(venturi dashboard --allowed-host)",
            )
        if self.password is not None:
            refused = self._check_password(request, self.password)
            if refused is not None:
                return refused
        if self.authorize is not None and not self.authorize(request.environ):
            return plain(HTTPStatus.FORBIDDEN, "not allowed")
        if request.path.startswith("/static/"):
            return self._static(request.path.removeprefix("/static/"))
        try:
            if request.method == "POST":
                return self._act(request)
            if request.method not in ("GET", "HEAD"):
                return plain(HTTPStatus.METHOD_NOT_ALLOWED, "GET or POST only")
            return self._page(request)
        except (InvalidJob, BadRequest) as exc:
            return self._error(request, HTTPStatus.BAD_REQUEST, str(exc))
        except StoreUnavailable as exc:
            logger.warning("dashboard: the database is unreachable: %s", exc)
            return self._error(request, HTTPStatus.SERVICE_UNAVAILABLE, UNREACHABLE)
        except SchemaError as exc:
            return self._error(request, HTTPStatus.SERVICE_UNAVAILABLE, self._schema(exc))

    def _check_password(self, request: Request, password: str) -> Response | None:
        """None if the request carries ``password``; else a 401, or a 429 while its
        client waits out the delay its wrong guesses earned."""
        wait = self.login_throttle.retry_after(request.client)
        if wait:
            return plain(
                HTTPStatus.TOO_MANY_REQUESTS,
                f"too many wrong passwords: try again in {wait} s",
                [("Retry-After", str(wait))],
            )
        if password_matches(request, password):
            self.login_throttle.succeeded(request.client)
            return None
        if request.basic_password() is not None:
            self.login_throttle.failed(request.client)
        challenge = [("WWW-Authenticate", 'Basic realm="venturi", charset="UTF-8"')]
        return plain(HTTPStatus.UNAUTHORIZED, "password required", challenge)

    def _schema(self, exc: SchemaError) -> str:
        if isinstance(exc.__cause__, UndefinedTable):
            return f"the prefix {self.queue.prefix} has no tables: run `venturi migrate`"
        return f"the tables of prefix {self.queue.prefix} do not match this venturi: {exc}"

    # -- pages ------------------------------------------------------------------------

    def _page(self, request: Request) -> Response:
        pages.checked_query(request.query)
        path = request.path.rstrip("/") or "/"
        simple: dict[str, tuple[str, Callable[[Queue], dict[str, Any]]]] = {
            "/": ("overview.html", pages.overview),
            "/dead": ("dead.html", pages.dead),
            "/workers": ("workers.html", pages.workers),
            "/kinds": ("kinds.html", pages.kinds),
            "/schedules": ("schedules.html", pages.schedules),
        }
        if path in simple:
            template, read = simple[path]
            return self._render(request, template, read(self.queue))
        if path == "/jobs":
            return self._render(
                request, "jobs.html", pages.jobs(self.queue, request.query, self.page_size)
            )
        if path == "/workflows":
            wanted = request.query.get("id", "").strip()
            if wanted:
                return redirect(request.url(f"/workflows/{quote(wanted, safe='')}"))
            return self._render(request, "workflow_find.html", {})
        if match := _JOB.fullmatch(path):
            found = pages.job(self.queue, unquote(match.group(1)))
            if found is None:
                return self._error(request, HTTPStatus.NOT_FOUND, f"no job {match.group(1)}")
            return self._render(request, "job.html", found)
        if match := _WORKFLOW.fullmatch(path):
            flow = pages.workflow(self.queue, match.group(1))
            if flow is None:
                return self._error(request, HTTPStatus.NOT_FOUND, f"no workflow {match.group(1)}")
            return self._render(request, "workflow.html", flow)
        return self._error(request, HTTPStatus.NOT_FOUND, f"no page {path}")

    def _render(
        self,
        request: Request,
        template: str,
        context: dict[str, Any],
        status: HTTPStatus = HTTPStatus.OK,
    ) -> Response:
        session, new_session = self.csrf.session_for(request)
        notice = unquote(request.cookies.get(NOTICE_COOKIE, ""))
        partial = request.header("X-Venturi-Partial") == "1"
        body = self.templates.get_template(template).render(
            **context,
            root=request.root,
            path=request.path,
            here=request.url(request.path, **request.query),
            csrf_field=CSRF_FIELD,
            csrf_token=self.csrf.token(session),
            read_only=self.read_only,
            refresh_ms=int(self.refresh_seconds * 1000),
            notice=notice,
            partial=partial,
            url=request.url,
        )
        headers = []
        secure = self._secure(request)
        if new_session:
            headers.append(CsrfTokens.cookie_header(session, request.root or "/", secure))
        if notice and not partial:
            flags = "; Secure" if secure else ""
            cookie = f"{NOTICE_COOKIE}=; Path={request.root or '/'}; Max-Age=0{flags}"
            headers.append(("Set-Cookie", cookie))
        return Response(body.encode(), status, headers=headers)

    def _secure(self, request: Request) -> bool:
        return self.secure_cookies or request.is_https(self.trust_forwarded_proto)

    def _error(self, request: Request, status: HTTPStatus, message: str) -> Response:
        return self._render(request, "error.html", {"status": status, "message": message}, status)

    def _static(self, name: str) -> Response:
        if name not in _STATIC:
            return plain(HTTPStatus.NOT_FOUND, "no such file")
        body = resources.files("venturi.dashboard").joinpath("static", name).read_bytes()
        response = Response(body, content_type=f"{_STATIC[name]}; charset=utf-8")
        return response

    # -- actions ----------------------------------------------------------------------

    def _act(self, request: Request) -> Response:
        if self.read_only:
            return plain(HTTPStatus.FORBIDDEN, "this dashboard is read-only: actions are off")
        if not self.csrf.accepts(request):
            return plain(HTTPStatus.FORBIDDEN, "missing or wrong CSRF token; reload the page")
        path = request.path.rstrip("/")
        back = self._next(request)
        try:
            if match := _JOB_ACTION.fullmatch(path):
                notice = actions.on_job(self.queue, match.group(1), match.group(2))
            elif match := _SIGNAL_ACTION.fullmatch(path):
                form = request.form
                notice = actions.signal(
                    self.queue, match.group(1), form.get("name", ""), form.get("payload", "")
                )
            elif match := _KIND_ACTION.fullmatch(path):
                notice = actions.on_kind(self.queue, request.form.get("kind", ""), match.group(1))
            elif path == "/dead/requeue":
                kind = request.form.get("kind", "")
                if request.form.get("confirm") != "yes":
                    return self._confirm_requeue(request, kind, back)
                notice = actions.requeue_dead(self.queue, kind)
            else:
                return plain(HTTPStatus.NOT_FOUND, f"no action {path}")
        except VenturiError as exc:
            notice = f"refused: {exc}"
        response = redirect(back)
        cookie = f"{NOTICE_COOKIE}={quote(notice, safe='')}; Path={request.root or '/'}; Max-Age=60"
        flags = "; HttpOnly; SameSite=Strict" + ("; Secure" if self._secure(request) else "")
        response.headers.append(("Set-Cookie", cookie + flags))
        return response

    def _confirm_requeue(self, request: Request, kind: str, back: str) -> Response:
        groups = [g for g in self.queue.dead_groups(pages.DEAD_SAMPLE) if g.kind == kind]
        return self._render(
            request,
            "confirm.html",
            {"kind": kind, "sampled": sum(g.count for g in groups), "back": back},
        )

    @staticmethod
    def _next(request: Request) -> str:
        """Where to go after an action: the form's ``next`` if it is a path of this
        dashboard (never another site), else the overview."""
        wanted = request.form.get("next", "")
        below = wanted.removeprefix(request.root) if wanted.startswith(request.root) else ""
        if _LOCAL_PATH.fullmatch(wanted) and _LOCAL_PATH.fullmatch(below):
            return wanted
        return request.root + "/"
