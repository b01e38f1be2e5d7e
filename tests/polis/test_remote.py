"""polis.connect: the same spec on a real `polis serve` gives a run with the same datasets and row counts as a
local one; a wrong token is a typed 401 that never shows the token; a bad spec is refused before it is sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polis
from service.auth import create_token
from service.client_errors import NotFoundError, UnauthorizedError
from service.settings import ServiceSettings
from tests.polis.test_session import spec_data
from tests.service.live import serve


@pytest.fixture(scope="module")
def service(cluster_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tokens = tmp_path_factory.mktemp("remote-tokens") / "tokens.json"
    token = create_token(tokens, "lab-a")
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("remote-data"), scheduler=cluster_address, auth_tokens=tokens)
    with serve(settings, token=token) as http:
        yield str(http.base_url).rstrip("/"), token


def test_a_spec_run_remotely_reads_like_the_same_spec_run_locally(
    service: tuple[str, str], cluster_address: str, tmp_path: Path
) -> None:
    url, token = service
    spec = polis.ExperimentSpec.model_validate(spec_data("same-both-ways"))
    with polis.Session(scheduler=cluster_address) as session:
        local = session.run(spec, tmp_path / "local", progress=False)
    with polis.connect(url, token) as remote_session:
        remote = remote_session.run(spec)
        assert remote.status == local.status == "completed"
        assert remote.datasets() == local.datasets()
        for name in remote.datasets():
            assert remote.table(name).num_rows == local.table(name).num_rows, name
        query = "SELECT agent_id, count(*) AS n FROM actions GROUP BY ALL ORDER BY agent_id"
        assert remote.sql(query).to_pylist() == local.sql(query).to_pylist()
        assert remote.df("actions").shape == local.df("actions").shape
        con = remote.duckdb()
        assert con.execute("SELECT count(*) FROM actions").fetchone() == (6,)
        assert remote.summary()["agent_steps"] == local.summary()["agent_steps"] == 6
        assert remote.detail.spec["name"] == "same-both-ways"  # the service's typed model, not a dict
        assert remote_session.open_run(remote.id).status == "completed"
        with pytest.raises(NotFoundError):
            remote_session.open_run("000000000000")


def test_a_wrong_token_is_a_typed_401_that_never_shows_the_token(service: tuple[str, str]) -> None:
    url, _ = service
    secret = "polis_wrong-token-that-must-not-leak"
    with polis.connect(url, secret) as remote_session, pytest.raises(UnauthorizedError) as refused:
        remote_session.submit(spec_data("refused"))
    assert refused.value.status_code == 401 and secret not in str(refused.value) and secret not in repr(refused.value)


def test_a_bad_spec_is_refused_locally_with_its_field_path_and_nothing_is_sent(service: tuple[str, str]) -> None:
    url, token = service
    bad: dict[str, Any] = spec_data("bad", agents=[{"id": -1}])
    with polis.connect(url, token) as remote_session:
        before = len(remote_session.client.list())
        with pytest.raises(polis.SpecError, match=r"agents\.0\.id"):
            remote_session.submit(bad)
        assert len(remote_session.client.list()) == before
