"""``/login`` and ``/logout``: a browser's session for a service with tokens.

A page load or an ``EventSource`` cannot send ``Authorization: Bearer``, so ``POST /login`` takes the
token from a form, checks it, and keeps it in the :data:`~service.admission.auth.SESSION_COOKIE` cookie
(``HttpOnly``, ``SameSite=Strict``, ``Secure`` over HTTPS), then sends the browser on to ``next``.
The token travels in the form body, never in a URL (access logs record URLs). Browser-only, so the
routes stay out of the OpenAPI document.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from urllib.parse import parse_qs

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.admission.auth import SESSION_COOKIE, TokenStore, same_origin
from service.state import State

__all__ = ["router", "safe_next"]

router = APIRouter(include_in_schema=False)

#: The largest login form read (a token is ~50 bytes).
_MAX_FORM_BYTES = 4096
#: How long a browser keeps the session (seconds).
SESSION_MAX_AGE_S = 7 * 24 * 3600


@cache
def _template() -> jinja2.Template:
    loader = jinja2.FileSystemLoader(Path(__file__).parent.parent / "templates")
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined).get_template("login.html")


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this service (``/...``), never another site (``//host``)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/docs"
    return target


def _page(next_path: str, problem: str | None = None, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(_template().render(next=next_path, problem=problem), status_code=status_code)


@router.get("/login", response_class=HTMLResponse)
async def login_page(next: str | None = None) -> HTMLResponse:  # noqa: A002  # the query parameter's name
    """The sign-in form."""
    return _page(safe_next(next))


@router.post("/login")
async def login(request: Request, state: State) -> Response:
    """Check the form's token; on success set the session cookie and redirect (303) to ``next``."""
    body = await request.body()
    form = parse_qs(body[:_MAX_FORM_BYTES].decode("utf-8", "replace"))
    next_path = safe_next(form["next"][0] if form.get("next") else None)
    token = (form.get("token") or [""])[0].strip()
    store: TokenStore | None = state.tokens
    if store is None:  # no tokens: everyone is the local admin already
        return RedirectResponse(next_path, status_code=303)
    if not same_origin(request):
        return _page(next_path, "Sign in from this service's own form.", status_code=403)
    if store.principal(token) is None:
        return _page(next_path, "Unknown token.", status_code=401)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(SESSION_COOKIE, token, max_age=SESSION_MAX_AGE_S, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


@router.post("/logout")
async def logout() -> Response:
    """Forget the session cookie."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
