"""``docker-compose.yml`` means what its comments say, read from ``docker-compose config``'s parsed output.

docker-compose 1.29 (Debian's) accepts the file with and without the ``dry-run`` profile, and so
does the Compose specification's JSON schema; the services, the worker count, the memory limits, the
volume, the environment, the healthchecks and ``depends_on`` are asserted from what Compose resolved.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import dask.config
import jsonschema
import pytest
from dask.utils import parse_bytes

from engine.settings import THREADS_PER_WORKER
from engine.society.run.cluster import CLUSTER_CONFIG
from service.settings import ServiceSettings
from tests.deploy.compose import (
    COMPOSE_FILE,
    ROOT,
    compose_config,
    compose_spec_schema,
    docker_bytes,
    option,
    raw_compose,
    run_compose,
)

SERVICES = {"scheduler", "worker", "service", "sim-llm"}
#: The processes that run Polis code against the cluster (the workers run the agents; the service, and
#: `docker compose run service polis run`, drive them): each needs the provider keys.
KEY_USERS = ("worker", "service")
PROVIDER_KEYS = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``docker-compose config`` with an empty ``.env``: every default of the file."""
    return compose_config(tmp_path_factory.mktemp("compose"))


def services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = config["services"]
    return found


def setting_names() -> set[str]:
    """Every environment variable a Polis settings tree reads (``POLIS_*``)."""
    return {field.validation_alias if isinstance(field.validation_alias, str) else f"POLIS_{name.upper()}"
            for name, field in ServiceSettings.model_fields.items()}


def test_config_accepts_the_file_with_and_without_the_dry_run_profile(tmp_path: Path, config: dict[str, Any]):
    assert set(services(config)) == SERVICES
    with_profile = compose_config(tmp_path, "--profile", "dry-run")
    assert set(services(with_profile)) == SERVICES
    profiles = run_compose(tmp_path, "config", "--profiles")
    assert profiles.returncode == 0, profiles.stderr
    assert profiles.stdout.split() == ["dry-run"]
    # Only the simulated LLM is optional; `docker compose up` starts the other three.
    assert {name: svc.get("profiles") for name, svc in services(config).items()} == {
        "scheduler": None, "worker": None, "service": None, "sim-llm": ["dry-run"]}


def test_the_file_and_what_compose_resolved_match_the_compose_spec_schema(config: dict[str, Any]):
    validator = jsonschema.Draft201909Validator(compose_spec_schema())
    for document in (raw_compose(), config):
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
        assert errors == []
    # The schema is strict enough to catch a slip of the kind this file could make.
    broken = copy.deepcopy(config)
    broken["services"]["worker"]["deploy"]["replicas"] = "2"
    broken["services"]["worker"]["healthcheck"]["every"] = "10s"
    assert len(list(validator.iter_errors(broken))) == 2


def test_every_service_runs_the_one_image_which_each_can_build(tmp_path: Path, config: dict[str, Any]):
    all_services = services(config).values()
    assert {svc["image"] for svc in all_services} == {"polis:local"}
    assert {(svc["build"]["context"], svc["build"]["dockerfile"]) for svc in all_services} == {(str(ROOT), "deploy/Dockerfile")}
    assert (ROOT / "deploy" / "Dockerfile").is_file()
    # Always built from this checkout, never pulled: no polis image exists in a registry.
    assert {svc["pull_policy"] for svc in all_services} == {"build"}
    tagged = compose_config(tmp_path, dotenv="POLIS_IMAGE_TAG=v7\n")
    assert {svc["image"] for svc in services(tagged).values()} == {"polis:v7"}


def prose(text: str) -> str:
    """Comment or Markdown text with its line breaks, ``#`` marks and backticks gone, for matching sentences."""
    return " ".join(re.sub(r"^\s*#", "", line).replace("`", "").strip() for line in text.splitlines())


def test_the_worker_count_is_the_one_the_comment_and_the_docs_state(config: dict[str, Any]):
    worker = services(config)["worker"]
    replicas, nworkers = worker["deploy"]["replicas"], int(option(worker["command"], "--nworkers"))
    comment = prose(COMPOSE_FILE.read_text(encoding="utf-8"))
    stated = re.findall(r"(\d+) worker containers \(deploy\.replicas\) x (\d+) worker process each "
                        r"\(--nworkers (\d+)\) = (\d+) Dask worker processes", comment)
    assert stated == [(str(replicas), str(nworkers), str(nworkers), str(replicas * nworkers))]
    docs = prose((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8"))
    assert re.findall(r"(\d+) containers \(deploy\.replicas\) × (\d+) process each \(--nworkers (\d+)\) = (\d+) worker processes", docs) == stated
    assert f"{replicas * nworkers} Dask worker processes" in comment and f"{replicas * nworkers} Dask worker processes" in docs
    assert option(worker["command"], "--nthreads") == str(THREADS_PER_WORKER)  # as the embedded LocalCluster runs its workers


def test_each_worker_process_may_use_exactly_its_containers_memory(config: dict[str, Any]):
    worker = services(config)["worker"]
    limit = docker_bytes(worker["deploy"]["resources"]["limits"]["memory"])
    per_process = parse_bytes(option(worker["command"], "--memory-limit"))
    assert per_process * int(option(worker["command"], "--nworkers")) == limit == 2 * 2**30


def test_every_service_mounts_the_one_volume_at_the_same_path(config: dict[str, Any]):
    mounts = {name: svc["volumes"] for name, svc in services(config).items()}
    assert mounts == {name: ["polis-data:/data:rw"] for name in SERVICES}
    assert config["volumes"] == {"polis-data": {}}  # a named volume Compose creates, not a host path
    env = services(config)["service"]["environment"]
    # Everything the service and `polis run` write lands on the volume the workers see.
    for name in ("POLIS_DATA_DIR", "POLIS_HOME", "POLIS_AUTH_TOKENS"):
        assert Path(env[name]).is_relative_to("/data"), name


def test_provider_keys_are_passed_by_name_from_dotenv_and_never_given_a_value(tmp_path: Path, config: dict[str, Any]):
    raw = raw_compose()["services"]
    for name in KEY_USERS:
        assert PROVIDER_KEYS <= set(raw[name]["environment"])
        assert {raw[name]["environment"][key] for key in PROVIDER_KEYS} == {None}  # no value in the file
        assert {services(config)[name]["environment"][key] for key in PROVIDER_KEYS} == {None}  # none set: unset
    assert not PROVIDER_KEYS & set(services(config)["scheduler"].get("environment", {}))
    dotenv = "OPENAI_API_KEY=sk-from-dotenv\nGEMINI_API_KEY=g-from-dotenv\n"
    resolved = compose_config(tmp_path, dotenv=dotenv)
    for name in KEY_USERS:
        env = services(resolved)[name]["environment"]
        assert (env["OPENAI_API_KEY"], env["GEMINI_API_KEY"], env["ANTHROPIC_API_KEY"]) == ("sk-from-dotenv", "g-from-dotenv", None)
    # The example .env sets no key: copying it changes nothing until a line is uncommented.
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    assert not [line for line in example.splitlines() if line.split("=", 1)[0] in PROVIDER_KEYS]
    assert ".env" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert ".env" in (ROOT / ".dockerignore").read_text(encoding="utf-8").split()


def test_polis_variables_are_real_settings_and_the_files_own_are_not(config: dict[str, Any], monkeypatch: pytest.MonkeyPatch):
    names = setting_names()
    given = {key for svc in services(config).values() for key in svc.get("environment", {}) if key.startswith("POLIS_")}
    assert given == {"POLIS_SCHEDULER", "POLIS_DATA_DIR", "POLIS_HOME", "POLIS_AUTH_TOKENS", "POLIS_GRANTS", "POLIS_RUN_STORE",
                     "POLIS_TLS_CA_FILE", "POLIS_TLS_CERT", "POLIS_TLS_KEY"}
    assert given <= names
    # The variables only this file reads cannot be mistaken for (or shadow) a Polis setting.
    own = set(re.findall(r"\$\{(\w+)", COMPOSE_FILE.read_text(encoding="utf-8")))
    assert own == {"POLIS_IMAGE_TAG", "POLIS_DASHBOARD_URL", "POLIS_PUBLISH_ADDRESS"}
    assert not own & names
    # What the service's container reads, read the way `polis serve` reads it.
    for name in names:
        monkeypatch.delenv(name, raising=False)
    for key, value in services(config)["service"]["environment"].items():
        if key in names and value is not None:
            monkeypatch.setenv(key, value)
    settings = ServiceSettings()
    assert (settings.scheduler, settings.data_dir, settings.auth_tokens) == ("tls://scheduler:8786", Path("/data"), Path("/data/tokens.json"))
    assert (settings.home, settings.grants_file, settings.run_store) == (Path("/data/home"), None, None)


def test_object_storage_is_passed_by_name_to_every_process_that_touches_a_run(tmp_path: Path, config: dict[str, Any]):
    storage = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION"}
    raw = raw_compose()["services"]
    for name in KEY_USERS:
        assert {raw[name]["environment"][key] for key in storage} == {None}  # no value in the file
    dotenv = "POLIS_RUN_STORE=s3://bucket/polis\nAWS_ENDPOINT_URL=http://minio:9000\nAWS_ACCESS_KEY_ID=ak\n"
    resolved = services(compose_config(tmp_path, dotenv=dotenv))
    assert resolved["service"]["environment"]["POLIS_RUN_STORE"] == "s3://bucket/polis"
    for name in KEY_USERS:
        env = resolved[name]["environment"]
        assert (env["AWS_ENDPOINT_URL"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("http://minio:9000", "ak", None)


def test_the_dashboard_link_is_one_a_browser_on_the_host_can_open(tmp_path: Path, config: dict[str, Any]):
    scheduler, service = services(config)["scheduler"], services(config)["service"]
    link = dask.config.get("distributed.dashboard.link", config=dask.config.collect_env(service["environment"]))
    assert link == "http://localhost:8787/status"
    dashboard_port = option(scheduler["command"], "--dashboard-address").rsplit(":", 1)[1]
    assert f"127.0.0.1:{dashboard_port}:{dashboard_port}/tcp" in scheduler["ports"]
    moved = compose_config(tmp_path, dotenv="POLIS_DASHBOARD_URL=http://lab-box:9999\n")
    assert services(moved)["service"]["environment"]["DASK_DISTRIBUTED__DASHBOARD__LINK"] == "http://lab-box:9999/status"


def test_every_dask_process_gets_the_cluster_config_polis_gives_its_own_clusters(config: dict[str, Any]):
    for name in ("scheduler", "worker", "service"):
        seen = dask.config.collect_env(services(config)[name]["environment"])
        assert {key: dask.config.get(key, None, config=seen) for key in CLUSTER_CONFIG} == CLUSTER_CONFIG, name


def test_ports_are_published_on_loopback_and_the_service_where_env_says(tmp_path: Path, config: dict[str, Any]):
    published = {name: svc.get("ports", []) for name, svc in services(config).items()}
    assert published == {
        "scheduler": ["127.0.0.1:8786:8786/tcp", "127.0.0.1:8787:8787/tcp"],
        "worker": [],
        "service": ["127.0.0.1:8400:8400/tcp"],
        "sim-llm": [],
    }
    assert option(services(config)["scheduler"]["command"], "--port") == "8786"
    assert option(services(config)["service"]["command"], "--port") == "8400"
    wide = compose_config(tmp_path, dotenv="POLIS_PUBLISH_ADDRESS=0.0.0.0\n")
    assert services(wide)["service"]["ports"] == ["0.0.0.0:8400:8400/tcp"]
    assert services(wide)["scheduler"]["ports"] == published["scheduler"]  # the scheduler never leaves loopback


def healthcheck_url(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], test
    match = re.search(r"urlopen\('([^']+)'", test[3])
    assert match, test
    return match.group(1)


def listen_port(name: str, command: list[str]) -> str:
    """The port each service's command makes it answer HTTP on."""
    if name in ("scheduler", "worker"):
        return option(command, "--dashboard-address").rsplit(":", 1)[1]
    return option(command, "--port")


def test_every_healthcheck_asks_the_health_of_the_port_its_service_listens_on(config: dict[str, Any]):
    for name, svc in services(config).items():
        assert healthcheck_url(svc) == f"http://127.0.0.1:{listen_port(name, svc['command'])}/health", name
        assert svc["healthcheck"]["retries"] >= 3


def test_depends_on_waits_for_healthy_services(config: dict[str, Any]):
    depends = {name: svc.get("depends_on") for name, svc in services(config).items()}
    assert depends == {
        "scheduler": None,
        "worker": {"scheduler": {"condition": "service_healthy"}},
        "service": {"scheduler": {"condition": "service_healthy"}, "worker": {"condition": "service_healthy"}},
        "sim-llm": None,
    }


def test_the_scheduler_admits_only_tls_clients_with_the_deployments_certificate(config: dict[str, Any]):
    scheduler, worker, service = (services(config)[name] for name in ("scheduler", "worker", "service"))
    assert option(scheduler["command"], "--protocol") == "tls"
    assert worker["command"][2] == "tls://scheduler:8786" == service["environment"]["POLIS_SCHEDULER"]
    env = service["environment"]
    files = {"--tls-ca-file": env["POLIS_TLS_CA_FILE"], "--tls-cert": env["POLIS_TLS_CERT"], "--tls-key": env["POLIS_TLS_KEY"]}
    for name, svc in (("scheduler", scheduler), ("worker", worker)):
        assert {flag: option(svc["command"], flag) for flag in files} == files, name
    for name in ("scheduler", "worker", "service"):
        assert [s["source"] for s in services(config)[name]["secrets"]] == ["dask-tls-cert", "dask-tls-key"], name
    assert {f"/run/secrets/{name}" for name in config["secrets"]} == set(files.values())
    tls_dir = ROOT / "deploy" / "tls"
    assert {Path(secret["file"]).parent for secret in config["secrets"].values()} == {tls_dir}
    for ignore in (".gitignore", ".dockerignore"):  # keys are never committed nor baked into the image
        assert "deploy/tls/" in (ROOT / ignore).read_text(encoding="utf-8").split(), ignore
    assert "sim-llm" not in {name for name, svc in services(config).items() if svc.get("secrets")}
    # What the service reads makes Dask's Security: encryption required, the mounted certificate for its client.
    security = ServiceSettings(**{"tls_ca_file": env["POLIS_TLS_CA_FILE"], "tls_cert": env["POLIS_TLS_CERT"],
                                  "tls_key": env["POLIS_TLS_KEY"]}).security()
    assert security is not None and security.require_encryption
    assert (security.tls_ca_file, security.tls_client_cert, security.tls_client_key) == (
        env["POLIS_TLS_CA_FILE"], env["POLIS_TLS_CERT"], env["POLIS_TLS_KEY"])
