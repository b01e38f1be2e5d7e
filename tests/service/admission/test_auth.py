"""Owners and tokens: ``polis token create``, the loopback rule of ``polis serve``, and 401/404 over a real uvicorn."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from polis.cli import main
from service.admission.auth import TokenStore, hash_token
from service.errors import AuthConfigError
from service.server import check_listen_address, is_loopback
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final


@pytest.fixture(autouse=True)
def _no_polis_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POLIS_AUTH_TOKENS", "POLIS_HOST", "POLIS_GRANTS"):
        monkeypatch.delenv(name, raising=False)


def create(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["token", "create", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_token_create_prints_only_the_token_and_stores_only_its_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tokens.json"
    code, out, err = create(capsys, "--owner", "lab-a", "--file", str(path))
    assert code == 0, err
    token = out.removesuffix("\n")
    assert out.count("\n") == 1 and token.startswith("polis_") and len(token) > 30
    stored = path.read_text()
    assert token not in stored and hash_token(token) in stored
    assert "lab-a" in err and token not in err
    assert TokenStore.load(path).principal(token).owner == "lab-a"  # type: ignore[union-attr]
    assert path.stat().st_mode & 0o777 == 0o600


def test_token_create_appends_and_takes_the_file_from_polis_auth_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tokens.json"
    monkeypatch.setenv("POLIS_AUTH_TOKENS", str(path))
    _, user, _ = create(capsys, "--owner", "lab-a")
    _, admin, _ = create(capsys, "--owner", "ops", "--role", "admin")
    store = TokenStore.load(path)
    assert len(store) == 2
    assert store.principal(admin.strip()).is_admin  # type: ignore[union-attr]
    assert not store.principal(user.strip()).is_admin  # type: ignore[union-attr]


def test_token_create_refuses_a_bad_owner_and_a_missing_file_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = create(capsys, "--owner", "../etc", "--file", str(tmp_path / "t.json"))
    assert (code, out) == (2, "") and "owner" in err
    code, out, err = create(capsys, "--owner", "lab-a")
    assert (code, out) == (2, "") and "POLIS_AUTH_TOKENS" in err


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True),
                                                 ("::1", True), ("0.0.0.0", False), ("192.168.1.5", False), ("::", False)])
def test_loopback_hosts_are_recognised(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_without_tokens_the_service_refuses_a_non_loopback_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "loopback only" in check_listen_address(ServiceSettings(host="127.0.0.1"))
    with pytest.raises(AuthConfigError, match="POLIS_AUTH_TOKENS"):
        check_listen_address(ServiceSettings(host="0.0.0.0"))
    assert main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path / "d")]) == 2
    assert "not a loopback address" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_with_tokens_the_service_says_how_many_and_never_which(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tokens.json"
    tokens = [create(capsys, "--owner", owner, "--file", str(path))[1].strip() for owner in ("a", "a", "b")]
    message = check_listen_address(ServiceSettings(host="0.0.0.0", auth_tokens=path))
    assert "3 token(s) of 2 owner(s)" in message
    assert not any(token in message or hash_token(token) in message for token in tokens)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from service.admission.auth import create_token

    root = tmp_path_factory.mktemp("auth")
    path = root / "tokens.json"
    tokens = {"a": create_token(path, "lab-a"), "b": create_token(path, "lab-b"), "admin": create_token(path, "ops", "admin")}
    with serve(ServiceSettings(data_dir=root / "data", scheduler=IN_PROCESS, auth_tokens=path)) as http:
        yield {"http": http, "tokens": tokens}


def client_of(live: dict[str, Any], who: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {live['tokens'][who]}"} if who else {}
    return httpx.Client(base_url=live["http"].base_url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def a_run(live: dict[str, Any]) -> Iterator[str]:
    """Owner A's finished experiment."""
    from tests.service.conftest import small_spec_data

    with client_of(live, "a") as a:
        response = a.post("/experiments", json=small_spec_data("owned-by-a"))
        assert response.status_code == 201, response.text
        final = wait_until_final(a, response.json()["id"])
        assert final["status"] == "completed", final["error"]
        assert final["owner"] == "lab-a"
        yield final["id"]


@pytest.mark.parametrize("authorization", [None, "Bearer polis_not-a-token", "Basic dXNlcjpwYXNz", "Bearer"])
def test_without_a_valid_token_every_experiment_route_is_401(live: dict[str, Any], a_run: str, authorization: str | None,
                                                             make_spec_data: Callable[..., dict]) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    with httpx.Client(base_url=live["http"].base_url, headers=headers, timeout=30) as anyone:
        responses = [anyone.get("/experiments"), anyone.get(f"/experiments/{a_run}"),
                     anyone.post("/experiments", json=make_spec_data("x")), anyone.post(f"/experiments/{a_run}/cancel"),
                     anyone.get(f"/experiments/{a_run}/datasets"), anyone.get("/cluster")]
        health = anyone.get("/health")
    assert [r.status_code for r in responses] == [401] * 6
    assert all(r.headers["www-authenticate"] == "Bearer" for r in responses)
    assert health.json() == {"status": "ok"}  # health needs no token, and tells nothing but that


def test_another_owner_gets_404_on_get_cancel_datasets_and_download(live: dict[str, Any], a_run: str) -> None:
    with client_of(live, "b") as b, client_of(live, "a") as a:
        dataset = a.get(f"/experiments/{a_run}/datasets").json()["datasets"][0]["name"]
        assert a.get(f"/experiments/{a_run}/datasets/{dataset}.parquet").status_code == 200
        answers = [b.get(f"/experiments/{a_run}"), b.post(f"/experiments/{a_run}/cancel"),
                   b.get(f"/experiments/{a_run}/datasets"), b.get(f"/experiments/{a_run}/datasets/{dataset}.parquet")]
        unknown = b.get("/experiments/000000000000")
        listed = b.get("/experiments").json()["experiments"]
    assert [r.status_code for r in answers] == [404] * 4
    # The same answer as for an id that does not exist: ids do not leak.
    assert {json.dumps(r.json()).replace(a_run, "ID") for r in answers[:1]} == {
        json.dumps(unknown.json()).replace("000000000000", "ID")
    }
    assert a_run not in [e["id"] for e in listed]


def test_an_admin_sees_and_reads_every_owners_experiments(live: dict[str, Any], a_run: str,
                                                         make_spec_data: Callable[..., dict]) -> None:
    with client_of(live, "b") as b, client_of(live, "admin") as admin:
        b_id = b.post("/experiments", json=make_spec_data("owned-by-b")).json()["id"]
        wait_until_final(b, b_id)
        listed = {e["id"]: e["owner"] for e in admin.get("/experiments").json()["experiments"]}
        assert admin.get(f"/experiments/{a_run}").status_code == 200
        assert admin.get(f"/experiments/{a_run}/datasets").status_code == 200
        b_listed = [e["id"] for e in b.get("/experiments").json()["experiments"]]
    assert listed[a_run] == "lab-a" and listed[b_id] == "lab-b"
    assert b_listed == [b_id]
