"""A browser's session on a service with tokens: ``/login`` sets an HttpOnly cookie that opens the results
page and its event stream; a cookie alone changes nothing unless the request comes from the service's own pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import SESSION_COOKIE, create_token
from service.routes.session import safe_next
from service.settings import ServiceSettings
from tests.service.conftest import small_spec_data
from tests.service.live import serve, wait_until_final


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("session")
    path = root / "tokens.json"
    tokens = {"a": create_token(path, "lab-a"), "b": create_token(path, "lab-b")}
    with serve(ServiceSettings(data_dir=root / "data", scheduler=IN_PROCESS, auth_tokens=path)) as http:
        with httpx.Client(base_url=http.base_url, headers={"Authorization": f"Bearer {tokens['a']}"}, timeout=30) as a:
            response = a.post("/experiments", json=small_spec_data("seen-in-a-browser"))
            assert response.status_code == 201, response.text
            final = wait_until_final(a, response.json()["id"])
            assert final["status"] == "completed", final["error"]
        yield {"base": str(http.base_url).rstrip("/"), "tokens": tokens, "experiment": final["id"]}


def browser(live: dict[str, Any]) -> httpx.Client:
    """A client with no Authorization header, like a browser: it keeps cookies and follows nothing by itself."""
    return httpx.Client(base_url=live["base"], timeout=30)


def sign_in(client: httpx.Client, live: dict[str, Any], who: str, next_path: str) -> httpx.Response:
    return client.post("/login", data={"token": live["tokens"][who], "next": next_path}, headers={"Origin": live["base"]})


def test_the_login_cookie_opens_the_report_page_its_data_and_its_event_stream(live: dict[str, Any]) -> None:
    page = f"/experiments/{live['experiment']}/report"
    with browser(live) as client:
        assert client.get(page).status_code == 401
        form = client.get("/login", params={"next": page})
        assert form.status_code == 200 and 'name="token"' in form.text and f'value="{page}"' in form.text
        response = sign_in(client, live, "a", page)
        assert response.status_code == 303 and response.headers["location"] == page
        cookie = response.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert "Path=/" in cookie and "Secure" not in cookie  # plain HTTP on 127.0.0.1
        shown = client.get(page)
        assert shown.status_code == 200 and "seen-in-a-browser" in shown.text
        assert client.get(f"{page}/data").json()["report"]["title"] == "seen-in-a-browser"
        with client.stream("GET", f"/experiments/{live['experiment']}/events", headers={"Accept": "text/event-stream"}) as events:
            assert events.status_code == 200
            assert "event: final" in "".join(events.iter_text())


def test_a_cookie_changes_nothing_unless_the_request_comes_from_the_services_own_pages(live: dict[str, Any]) -> None:
    sql = f"/experiments/{live['experiment']}/sql"
    query = {"sql": "SELECT count(*) AS n FROM actions"}
    with browser(live) as client:
        sign_in(client, live, "a", "/")
        assert client.post(sql, json=query).status_code == 401  # no Origin, no Referer
        assert client.post(sql, json=query, headers={"Origin": "http://127.0.0.1.evil.example"}).status_code == 401
        assert client.post(f"/experiments/{live['experiment']}/cancel", headers={"Origin": "http://evil.example"}).status_code == 401
        answered = client.post(sql, json=query, headers={"Origin": live["base"], "Accept": "application/json"})
        assert answered.status_code == 200, answered.text
        with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['tokens']['a']}"}) as bearer:
            assert answered.json()["rows"] == bearer.post(sql, json=query).json()["rows"]
        # The header wins over the cookie: a wrong bearer token is refused even with a good cookie.
        assert client.get(f"/experiments/{live['experiment']}", headers={"Authorization": "Bearer polis_nope"}).status_code == 401


def test_another_owners_cookie_sees_404_and_a_bad_token_or_a_foreign_form_sets_no_cookie(live: dict[str, Any]) -> None:
    page = f"/experiments/{live['experiment']}/report"
    with browser(live) as client:
        sign_in(client, live, "b", page)
        assert client.get(page).status_code == 404
    with browser(live) as client:
        refused = client.post("/login", data={"token": "polis_nope", "next": page}, headers={"Origin": live["base"]})
        assert refused.status_code == 401 and "Unknown token" in refused.text and "set-cookie" not in refused.headers
        foreign = client.post("/login", data={"token": live["tokens"]["a"]}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and "set-cookie" not in foreign.headers
        assert client.get(page).status_code == 401


def test_logout_forgets_the_cookie(live: dict[str, Any]) -> None:
    page = f"/experiments/{live['experiment']}/report"
    with browser(live) as client:
        sign_in(client, live, "a", page)
        assert client.get(page).status_code == 200
        out = client.post("/logout", headers={"Origin": live["base"]})
        assert out.status_code == 303 and f'{SESSION_COOKIE}=""' in out.headers["set-cookie"]
        assert client.get(page).status_code == 401


@pytest.mark.parametrize(("target", "expected"), [
    ("/experiments/x/report", "/experiments/x/report"), (None, "/docs"), ("", "/docs"),
    ("//evil.example/x", "/docs"), ("https://evil.example/", "/docs"), ("/\\evil.example", "/docs"),
])
def test_after_signing_in_the_browser_goes_only_to_a_path_on_this_service(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected
