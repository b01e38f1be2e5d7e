"""Credentials belong to the server: the grant rule on its own, and over a real uvicorn with a fake LLM server."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.cluster_options import IN_PROCESS
from engine.errors import SpecError
from engine.llm.sim.process import sim_llm_process
from engine.spec import parse_spec
from service.admission.auth import create_token
from service.admission.grants import Grant, Grants, read_grants_file
from service.errors import AuthConfigError, CredentialNotGrantedError
from service.settings import ServiceSettings
from tests.service.conftest import small_spec_data
from tests.service.live import serve, wait_until_final

GPU = "http://gpu1:8000/v1"
GRANTS = Grants({
    "*": {"openai": Grant(api_key_env="OPENAI_API_KEY", models=["openai/*"])},
    "lab-a": {"vllm": Grant(base_url=GPU, api_key_env="VLLM_KEY")},
})


def spec_with(llm: dict[str, Any] | None = None, **fields: Any) -> Any:
    data = small_spec_data("grants")
    if llm is not None:
        data["llm"] = llm
    return parse_spec({**data, **fields})


def refused_path(spec: Any, owner: str = "lab-a", grants: Grants = GRANTS) -> str:
    with pytest.raises(CredentialNotGrantedError) as caught:
        grants.check_spec(spec, owner)
    return caught.value.path


@pytest.mark.parametrize("model", ["sim/default", "sim/default:other", "local/smollm2"])
def test_models_that_call_no_provider_need_no_grant(model: str) -> None:
    Grants().check_spec(spec_with({"default": {"model": model}, "coder": {"model": model}}), "anyone")


@pytest.mark.parametrize(
    ("client", "path"),
    [
        ({"model": "sim/default", "base_url": "http://127.0.0.1:9/v1"}, "llm.default.base_url"),
        ({"model": "sim/default", "api_key_env": "HOME"}, "llm.default.api_key_env"),
        ({"model": "openai/gpt-4o", "base_url": GPU, "api_key_env": "OPENAI_API_KEY"}, "llm.default.api_key_env"),
        ({"model": "anthropic/claude", "api_key_env": "OPENAI_API_KEY"}, "llm.default.model"),
        # No variable named and no base_url: the provider library would read its default variable.
        ({"model": "openai/gpt-4o"}, "llm.default.api_key_env"),
        ({"model": "openai/gpt-4o", "api_key_env": "OPENAI_API_KEY", "extra": {"api_base": "http://x"}},
         "llm.default.extra.api_base"),
    ],
)
def test_a_config_outside_the_owners_grants_is_refused_naming_the_field(client: dict[str, Any], path: str) -> None:
    assert refused_path(spec_with({"default": client})) == path


@pytest.mark.parametrize(
    "client",
    [
        {"model": "openai/gpt-4o", "api_key_env": "OPENAI_API_KEY", "options": {"temperature": 0.2}},
        {"model": "openai/llama", "base_url": GPU, "api_key_env": "VLLM_KEY"},
        {"model": "openai/llama", "base_url": GPU},  # no key variable: no key is sent
    ],
)
def test_a_config_matching_one_grant_is_accepted(client: dict[str, Any]) -> None:
    GRANTS.check_spec(spec_with({"default": client}), "lab-a")


def test_an_owners_own_grants_are_not_another_owners() -> None:
    spec = spec_with({"default": {"model": "openai/llama", "base_url": GPU, "api_key_env": "VLLM_KEY"}})
    GRANTS.check_spec(spec, "lab-a")
    assert refused_path(spec, owner="lab-b") == "llm.default.base_url"
    assert GRANTS.for_owner("lab-b").keys() == {"openai"}


def test_the_coder_and_the_embedder_are_checked_too() -> None:
    coder = spec_with({"default": {"model": "sim/default"}, "coder": {"model": "sim/default:x", "base_url": "http://evil/v1"}})
    assert refused_path(coder) == "llm.coder.base_url"
    embedder = spec_with(environment={"embedder": "openai/text-embedding-3-small", "modules": [{"type": "MessagingSpace"}]})
    assert refused_path(embedder) == "environment.embedder"
    Grants().check_spec(spec_with(environment={"embedder": "sim", "modules": [{"type": "MessagingSpace"}]}), "x")


def test_every_sweep_cell_is_checked_and_the_grid_key_named() -> None:
    by_url = spec_with({"default": {"model": "openai/llama", "base_url": GPU}},
                       sweep={"grid": {"llm.default.base_url": [GPU, "http://evil/v1"]}})
    assert refused_path(by_url) == "sweep.grid.llm.default.base_url"
    whole = spec_with(sweep={"grid": {"llm.default": [{"model": "sim/default"}, {"model": "sim/default:d", "api_key_env": "HOME"}]}})
    assert refused_path(whole) == "sweep.grid.llm.default"
    fine = spec_with(sweep={"grid": {"llm.default.options.temperature": [0.1, 0.9]}, "replications": 3})
    GRANTS.check_spec(fine, "lab-a")


def test_a_sweep_value_that_makes_no_valid_llm_config_is_a_spec_error() -> None:
    spec = spec_with(sweep={"grid": {"llm.default.api_key_env": ["not a name"]}})
    with pytest.raises(SpecError) as caught:
        GRANTS.check_spec(spec, "lab-a")
    assert caught.value.path == "sweep"


@pytest.mark.parametrize("grant", [
    {"api_key_env": "OPENAI_API_KEY"},  # issue 33: any provider; hosted_vllm/ sent the key to api.openai.com
    {"api_key_env": "OPENAI_API_KEY", "models": []},
    {"api_key_env": "OPENAI_API_KEY", "models": ["*"]},
    {"api_key_env": "OPENAI_API_KEY", "models": ["gpt-4o"]},
    {"api_key_env": "OPENAI_API_KEY", "models": ["open*/gpt-4o"]},
])
def test_a_grant_not_bound_to_a_provider_or_base_url_is_refused_at_load(tmp_path: Path, grant: dict[str, Any]) -> None:
    (tmp_path / "grants.json").write_text(json.dumps({"credentials": {"lab-a": {"openai": grant}}}))
    with pytest.raises(AuthConfigError, match="provider"):
        read_grants_file(tmp_path / "grants.json")


def test_a_grant_bound_by_provider_patterns_or_a_base_url_loads(tmp_path: Path) -> None:
    (tmp_path / "grants.json").write_text(json.dumps({"credentials": {"*": {
        "openai": {"api_key_env": "OPENAI_API_KEY", "models": ["openai/*", "azure/gpt-4o*"]},
        "vllm": {"base_url": "http://gpu1:8000/v1", "api_key_env": "VLLM_KEY"},
    }}}))
    assert set(read_grants_file(tmp_path / "grants.json").credentials["*"]) == {"openai", "vllm"}


def test_an_unreadable_grants_file_is_a_startup_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"credentials": {"*": {"x": {"api_key": "sk-1"}}}}))
    with pytest.raises(AuthConfigError, match="not valid"):
        read_grants_file(tmp_path / "bad.json")
    with pytest.raises(AuthConfigError, match="does not exist"):
        read_grants_file(tmp_path / "missing.json")


class _CountingHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request 200 and remembers what it was sent (headers included)."""

    seen: list[str]

    def _answer(self) -> None:
        self.seen.append(f"{self.command} {self.path} {dict(self.headers)}")
        self.send_response(200)
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def fake_llm_server() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_CountingHandler,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def sim_llm() -> Iterator[Any]:
    with sim_llm_process() as process:
        yield process


def test_over_rest_a_spec_naming_a_secret_variable_or_a_url_gets_422_and_the_url_sees_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim_llm: Any,
    make_spec_data: Callable[..., dict[str, Any]],
) -> None:
    monkeypatch.setenv("POLIS_TEST_SERVER_SECRET", "s3cret-value")
    tokens = tmp_path / "tokens.json"
    token = create_token(tokens, "lab-a")
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"credentials": {"lab-a": {"sim": {"base_url": sim_llm.base_url}}}}))
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, auth_tokens=tokens, grants_file=grants)
    with fake_llm_server() as (fake_url, seen), serve(settings, token=token) as http_:
        attempts = [
            ({"model": "openai/x", "base_url": fake_url, "api_key_env": "POLIS_TEST_SERVER_SECRET"}, "base_url"),
            ({"model": "openai/x", "base_url": sim_llm.base_url, "api_key_env": "POLIS_TEST_SERVER_SECRET"}, "api_key_env"),
            ({"model": "anthropic/claude", "api_key_env": "POLIS_TEST_SERVER_SECRET"}, "api_key_env"),
        ]
        for client, field in attempts:
            response = http_.post("/experiments", json={**make_spec_data("steal"), "llm": {"default": client}})
            assert response.status_code == 422, response.text
            assert response.json()["detail"][0]["loc"] == ["body", "llm", "default", field]
            assert "s3cret-value" not in response.text
        granted = http_.post("/experiments", json={
            **make_spec_data("granted"), "llm": {"default": {"model": "openai/sim", "base_url": sim_llm.base_url}},
        })
        assert granted.status_code == 201, granted.text
        final = wait_until_final(http_, granted.json()["id"])
        # The refused specs were never registered, and wrote no run directory.
        assert [e["id"] for e in http_.get("/experiments").json()["experiments"]] == [final["id"]]
        assert [p.name for p in (tmp_path / "data" / "runs").iterdir()] == [final["id"]]
    assert final["status"] == "completed", final["error"]
    assert sum(sim_llm.stats()["calls"].values()) >= 1  # the run went to the granted endpoint
    assert seen == []
