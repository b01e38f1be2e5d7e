"""Mutual TLS to the scheduler (POLIS_TLS_*): a LocalCluster on tls:// runs a society, and admits no client without
the deployment's certificate: none, another CA's, or plain TCP."""

from __future__ import annotations

import operator
import subprocess
from pathlib import Path

import pytest
from distributed import Client
from distributed.security import Security

from engine.settings import EngineSettings
from engine.society.run.cluster import open_client
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate and its key (the certificate is its own CA), as docs/deploy.md makes them."""
    directory.mkdir(parents=True)
    cert, key = directory / "dask.pem", directory / "dask.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def test_the_tls_settings_go_together() -> None:
    with pytest.raises(ValueError, match="go together"):
        EngineSettings(tls_cert=Path("/x.pem"))
    assert EngineSettings().security() is None


async def test_a_tls_cluster_runs_a_society_and_admits_only_the_deployments_certificate(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path / "deployment", "polis-dask")
    rogue_cert, rogue_key = _certificate(tmp_path / "rogue", "rogue")
    settings = EngineSettings(tls_ca_file=cert, tls_cert=cert, tls_key=key, n_workers=1, dashboard_address="127.0.0.1:0")
    async with open_client(None, **settings.cluster_options()) as client:
        address = client.scheduler.address
        assert address.startswith("tls://")
        assert all(worker.startswith("tls://") for worker in client.scheduler_info()["workers"])
        assert await client.submit(operator.add, 1, 2) == 3

        spec = parse_spec({"name": "tls", "llm": {"default": {"model": "sim/default"}},
                           "agents": [{"id": i, "config": {"max_react_turns": 1}} for i in range(3)],
                           "steps": [{"type": "run", "num_steps": 1, "tick": 600}]})
        summary = await run_experiment(spec, tmp_path / "run", client)
        assert summary.status == "completed" and summary.agent_steps == 3

        async with Client(address, security=settings.security(), asynchronous=True, timeout="60s") as again:  # bounds a hang
            assert await again.submit(operator.mul, 6, 7) == 42  # what the service does with POLIS_TLS_*

        rogue = Security(require_encryption=True, tls_ca_file=str(rogue_cert), tls_client_cert=str(rogue_cert),
                         tls_client_key=str(rogue_key))
        attempts = [("no certificate", address, None), ("another CA's certificate", address, rogue),
                    ("plain TCP", address.replace("tls://", "tcp://"), None)]
        for attempt, where, security in attempts:
            await _refused(where, security, attempt)


async def _refused(address: str, security: Security | None, attempt: str) -> None:
    """Connecting fails (Dask raises OSError, TimeoutError or TypeError, by the way it fails); the client is closed."""
    client = Client(address, security=security, asynchronous=True, timeout="5s")
    try:
        with pytest.raises((OSError, TimeoutError, TypeError, ValueError)):
            await client
    finally:
        await client.close()
    assert client.status in {"closed", "closing", "failed"}, attempt
