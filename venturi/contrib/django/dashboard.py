"""The dashboard (`venturi.dashboard`) as a Django view, behind Django's users: active
staff by default, or the permission ``VENTURI["DASHBOARD_PERMISSION"]`` names. Host
names are Django's ``ALLOWED_HOSTS``; its cookies are Secure over HTTPS (as Django sees
it: ``SECURE_PROXY_SSL_HEADER``) and always under ``CSRF_COOKIE_SECURE``."""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings as django_settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from venturi.dashboard import Dashboard
from venturi.dashboard.http import call_mounted

from .conf import VenturiSettings
from .queue import get_queue

_lock = threading.Lock()
_dashboards: dict[str, Dashboard] = {}


def allowed(request: HttpRequest, settings: VenturiSettings) -> bool:
    """The user may see the dashboard: the configured permission, else active staff."""
    user: Any = request.user
    if not (user.is_authenticated and user.is_active):
        return False
    if settings.dashboard_permission is not None:
        return bool(user.has_perm(settings.dashboard_permission))
    return bool(user.is_staff)


def _dashboard(settings: VenturiSettings) -> Dashboard:
    """The project's dashboard, made again when the queue or the settings changed."""
    queue = get_queue()
    with _lock:
        current = _dashboards.get("project")
        secure = bool(getattr(django_settings, "CSRF_COOKIE_SECURE", False))
        if (
            current is None
            or current.queue is not queue
            or current.read_only != settings.dashboard_read_only
            or current.secure_cookies != secure
        ):
            current = Dashboard(
                queue,
                read_only=settings.dashboard_read_only,
                secret=django_settings.SECRET_KEY,
                # The view checked the host (ALLOWED_HOSTS) and the user already.
                allowed_hosts=("*",),
                allow_anonymous=True,
                secure_cookies=secure,
            )
            _dashboards["project"] = current
        return current


# The dashboard checks its own CSRF token (bound to its session cookie) on every POST;
# Django's token is not in its forms.
@csrf_exempt
def dashboard_view(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Serve one dashboard page or action; 403 for users not allowed. A host outside
    ``ALLOWED_HOSTS`` raises Django's ``DisallowedHost`` (answered 400)."""
    settings = VenturiSettings.load()
    request.get_host()  # validates the Host header against ALLOWED_HOSTS
    if not allowed(request, settings):
        return HttpResponse("not allowed", status=403, content_type="text/plain")
    mount = request.path[: len(request.path) - len(rest)] if rest else request.path
    environ = dict(request.META)
    environ["wsgi.input"] = request  # Django's request reads its body like a stream
    environ["wsgi.url_scheme"] = request.scheme  # https behind a proxy Django trusts
    status, headers, body = call_mounted(_dashboard(settings), environ, mount, rest)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() == "set-cookie":
            _set_cookie(response, value)
        else:
            response.headers[name] = value
    return response


def _set_cookie(response: HttpResponse, header: str) -> None:
    """A ``Set-Cookie`` header of the dashboard's, through Django's cookie jar (one
    response may set several)."""
    first, *attributes = (part.strip() for part in header.split(";"))
    name, _, value = first.partition("=")
    flags = {k.lower(): v for k, _, v in (a.partition("=") for a in attributes)}
    response.set_cookie(
        name,
        value,
        max_age=int(flags["max-age"]) if "max-age" in flags else None,
        path=flags.get("path", "/"),
        httponly="httponly" in flags,
        secure="secure" in flags,
        samesite="Strict",  # every cookie of the dashboard is SameSite=Strict
    )
