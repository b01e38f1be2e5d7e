"""``/docs`` and ``/redoc`` that work offline, and ``/`` redirecting to them.

The Swagger UI and ReDoc bundles come from the installed ``fastapi-offline`` package (only its
``static/`` files are used) and are served under :data:`STATIC_DOCS_URL`, so the pages load with no
network. The app must be built with ``docs_url=None, redoc_url=None``; :func:`install_docs` adds the
rest.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["DOCS_ASSETS", "STATIC_DOCS_URL", "install_docs", "router"]

#: Where the documentation assets are served.
STATIC_DOCS_URL = "/static/docs"
#: The packaged Swagger UI and ReDoc files (swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png).
DOCS_ASSETS = Path(fastapi_offline.__file__).parent / "static"

_OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
# Swagger UI would otherwise fetch a validity badge from validator.swagger.io.
_SWAGGER_PARAMETERS = {"validatorUrl": None}

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=RedirectResponse)
async def root() -> RedirectResponse:
    """Send a browser that opens the service's address to the API documentation."""
    return RedirectResponse("/docs")


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI for the API, every asset local."""
    root_path = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root_path}{request.app.openapi_url}",
        title=f"{request.app.title} - Swagger UI",
        oauth2_redirect_url=f"{root_path}{_OAUTH2_REDIRECT_URL}",
        swagger_js_url=f"{root_path}{STATIC_DOCS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root_path}{STATIC_DOCS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root_path}{STATIC_DOCS_URL}/favicon.png",
        swagger_ui_parameters=_SWAGGER_PARAMETERS,
    )


@router.get(_OAUTH2_REDIRECT_URL, response_class=HTMLResponse)
async def swagger_ui_oauth2_redirect() -> HTMLResponse:
    """The page Swagger UI's OAuth2 flow returns to."""
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc", response_class=HTMLResponse)
async def redoc(request: Request) -> HTMLResponse:
    """ReDoc for the API, every asset local (no Google Fonts)."""
    root_path = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=f"{root_path}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root_path}{STATIC_DOCS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root_path}{STATIC_DOCS_URL}/favicon.png",
        with_google_fonts=False,
    )


def install_docs(app: FastAPI) -> None:
    """Add the documentation pages, the ``/`` redirect and the static assets to ``app``.

    Args:
        app: an app built with ``docs_url=None, redoc_url=None``.
    """
    app.mount(STATIC_DOCS_URL, StaticFiles(directory=DOCS_ASSETS), name="static-docs")
    app.include_router(router)
