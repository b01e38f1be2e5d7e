"""The commands ``docker-compose.yml`` and ``docs/deploy.md`` run are real: real CLIs, real options, real files.

Each service's ``command`` names ``polis serve``, ``polis sim-llm``, ``dask scheduler`` or ``dask worker``
with options that command's real ``--help`` lists; the documented ``docker compose run`` lines name a
service of the file and existing example specs; following the documented token step is what lets
``polis serve --host 0.0.0.0`` start; the healthchecks' python one-liners fail when nothing answers.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.llm.sim.process import sim_llm_process
from engine.spec import load_spec
from polis.cli import main as polis_main
from service.errors import AuthConfigError
from service.server import check_listen_address
from service.settings import ServiceSettings
from tests.deploy.compose import COMPOSE_FILE, ROOT, option, raw_compose

#: The CLIs a service may run, and how to ask this checkout's (the image's) copy for its help.
CLIS = {"polis": [sys.executable, "-m", "polis.cli"], "dask": [sys.executable, "-m", "dask"]}
EXPECTED = {"scheduler": "dask scheduler", "worker": "dask worker", "service": "polis serve", "sim-llm": "polis sim-llm"}
#: Where the compose file mounts the volume; the image's working directory, holding examples/.
VOLUME, WORKDIR = "/data", "/app"


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = raw_compose()["services"]
    return found


@functools.cache
def help_options(program: str, subcommand: tuple[str, ...]) -> frozenset[str]:
    """The ``--options`` a real ``<program> <subcommand> --help`` lists."""
    result = subprocess.run([*CLIS[program], *subcommand, "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout))


def assert_real_options(argv: list[str], depth: int) -> None:
    """``argv[:depth]`` is the command; every ``--option`` after it must be in its help."""
    given = {part.split("=", 1)[0] for part in argv[depth:] if part.startswith("--")}
    assert given <= help_options(argv[0], tuple(argv[1:depth])), argv


def documented_runs() -> list[list[str]]:
    """Every ``docker compose ...`` line the docs, the compose file's comments and the examples show."""
    texts = [(ROOT / "docs" / "deploy.md").read_text(encoding="utf-8"), COMPOSE_FILE.read_text(encoding="utf-8"),
             *(path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.yaml")))]
    lines = [m.group(1) for text in texts for m in re.finditer(r"^[#\s]*(docker compose .+?)\s*$", text, re.MULTILINE)]
    return [shlex.split(line) for line in lines]


def polis_argv(compose_argv: list[str]) -> tuple[str, list[str]]:
    """The service and the command of a ``docker compose run [--rm] [--no-deps] SERVICE polis ...`` line."""
    rest = compose_argv[compose_argv.index("run") + 1:]
    while rest[0].startswith("--"):
        rest = rest[1:]
    return rest[0], rest[1:]


def test_every_command_is_its_real_cli_with_options_its_help_lists():
    for name, svc in services().items():
        command = svc["command"]
        assert " ".join(command[:2]) == EXPECTED[name]
        assert_real_options(command, 2)


def test_the_workers_join_the_scheduler_at_its_service_name_and_port():
    worker, scheduler = services()["worker"]["command"], services()["scheduler"]["command"]
    assert worker[2] == f"tls://scheduler:{option(scheduler, '--port')}"


def test_documented_compose_runs_name_real_services_commands_and_files():
    runs = [argv for argv in documented_runs() if "run" in argv]
    assert len(runs) >= 4  # the token step, the demo, the dry run (docs and comments)
    for argv in runs:
        service, command = polis_argv(argv)
        assert service in services(), argv
        assert command[0] == "polis"
        depth = 3 if command[1] == "token" else 2
        assert_real_options(command, depth)
        if command[1] == "run":
            assert (ROOT / command[2]).is_file(), command  # examples/ is copied to the image's WORKDIR
            load_spec(ROOT / command[2])
            run_dir = option(command, "--run-dir")  # on the volume every worker mounts, or in object storage
            assert run_dir.startswith("s3://") or Path(run_dir).is_relative_to(Path(VOLUME) / "runs"), command
    profiles = [argv[argv.index("--profile") + 1] for argv in documented_runs() if "--profile" in argv]
    assert set(profiles) == {"dry-run"} == {p for svc in services().values() for p in svc.get("profiles", [])}


def test_the_docs_give_compose_in_six_commands_with_the_certificate_first_and_the_token_before_up():
    docs = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = docs.split("## Docker Compose", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 6
    # The certificate and key the compose file mounts as secrets, made where it looks for them.
    assert commands[0].startswith("mkdir -p deploy/tls && openssl req -x509 ")
    made = {option(commands[0].split(" && ")[1].split(), flag) for flag in ("-keyout", "-out")}
    assert made == {str(Path(secret["file"])) for secret in raw_compose()["secrets"].values()}
    assert commands[1] == "cp .env.example .env" and (ROOT / ".env.example").is_file()
    assert commands[2] == "docker compose build"
    assert "polis token create" in commands[3] and commands[4] == "docker compose up -d"
    assert " polis run " in commands[5]


def test_following_the_documented_token_step_lets_the_service_listen_on_all_interfaces(tmp_path: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch):
    service = services()["service"]
    host = option(service["command"], "--host")
    # The service's environment, with the volume at tmp_path/data instead of /data.
    (tmp_path / "data").mkdir()
    for key, value in service["environment"].items():
        if key.startswith("POLIS_") and value is not None:
            monkeypatch.setenv(key, value.replace(VOLUME, str(tmp_path / "data"), 1))
    with pytest.raises(AuthConfigError, match="does not exist"):  # `up` before the token step fails loudly
        check_listen_address(ServiceSettings(host=host))
    token_step = next(argv for argv in documented_runs() if "token" in argv)
    assert polis_argv(token_step)[0] == "service" and "--no-deps" in token_step  # needs no cluster
    assert polis_main(polis_argv(token_step)[1][1:]) == 0
    assert "1 token(s)" in check_listen_address(ServiceSettings(host=host))
    monkeypatch.delenv("POLIS_AUTH_TOKENS")
    with pytest.raises(AuthConfigError, match="not a loopback address"):  # what the token file prevents
        check_listen_address(ServiceSettings(host=host))


def test_the_dry_run_example_calls_the_sim_llm_service():
    spec = load_spec(ROOT / "examples" / "demo_sim_llm.yaml")
    sim = services()["sim-llm"]
    assert spec.llm.default.base_url == f"http://sim-llm:{option(sim['command'], '--port')}/v1"
    assert sim["profiles"] == ["dry-run"]


def test_a_healthcheck_one_liner_passes_on_a_live_server_and_fails_without_one():
    test = services()["sim-llm"]["healthcheck"]["test"]
    port = option(services()["sim-llm"]["command"], "--port")
    with sim_llm_process() as server:
        live = server.url.rsplit(":", 1)[1]
        probe = test[3].replace(f":{port}/", f":{live}/")
        assert subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=30).returncode == 0
    dead = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert dead.returncode != 0 and "Connection refused" in dead.stderr
