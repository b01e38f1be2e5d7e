"""Read ``docker-compose.yml`` the way Compose does: Debian's ``docker-compose config``, and the spec's schema.

:data:`DOCKER_COMPOSE` is the docker-compose found on this machine (or None); :func:`require_docker_compose`
fails a test when ``CI=true`` and there is none, and skips it loudly elsewhere (``make test`` installs
it when it runs as root). :func:`compose_config` runs ``docker-compose config`` with a controlled
``.env`` and no other environment, so a developer's own ``.env`` or shell keys never reach a test, and
parses the YAML it prints. :func:`compose_spec_schema` reads the Compose specification's JSON schema
that docker-compose itself validates with (``compose/config/compose_spec.json`` in its package).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = [
    "COMPOSE_FILE",
    "DOCKER_COMPOSE",
    "INSTALL_HINT",
    "ROOT",
    "compose_config",
    "compose_spec_schema",
    "docker_bytes",
    "option",
    "raw_compose",
    "require_docker_compose",
]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKER_COMPOSE = shutil.which("docker-compose")
#: How to get it on Debian (``make test`` does it when it runs as root).
INSTALL_HINT = "apt-get update && apt-get install -y docker-compose"

#: Docker's memory units are binary (go-units ``RAMInBytes``: ``2g`` = ``2G`` = ``2gb`` = 2 GiB).
_DOCKER_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def require_docker_compose() -> str:
    """docker-compose's path; fails the test in CI (``CI=true``) when there is none, else skips it loudly."""
    if DOCKER_COMPOSE is not None:
        return DOCKER_COMPOSE
    message = f"no docker-compose on this machine; install it with: {INSTALL_HINT}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {message}")
    pytest.skip(f"SKIPPED, NOT RUN: {message}")


def run_compose(home: Path, *args: str, dotenv: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``docker-compose <args>`` on the repository's file with ``dotenv`` as its ``.env``.

    Only PATH reaches docker-compose, and HOME is ``home``: the result depends on the file and
    ``dotenv`` alone.
    """
    env_file = home / "compose-test.env"
    env_file.write_text(dotenv, encoding="utf-8")
    argv = [require_docker_compose(), "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE), "--env-file", str(env_file), *args]
    return subprocess.run(argv, env={"PATH": os.environ["PATH"], "HOME": str(home)}, capture_output=True, text=True, timeout=120)


def compose_config(home: Path, *args: str, dotenv: str = "") -> dict[str, Any]:
    """The parsed output of ``docker-compose [args] config`` (profiles go in ``args``)."""
    result = run_compose(home, *args, "config", dotenv=dotenv)
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def raw_compose() -> dict[str, Any]:
    """The compose file as YAML, uninterpolated (anchors and merge keys resolved)."""
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return data


def compose_spec_schema() -> dict[str, Any]:
    """The Compose specification's JSON schema shipped inside the docker-compose found here.

    docker-compose 1.29 is a Python program; its own interpreter (from the script's ``#!`` line)
    says where its ``compose.config`` package, and the schema beside it, live.
    """
    script = Path(require_docker_compose())
    shebang = script.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    assert shebang.startswith("#!"), f"{script} is not a Python script: no Compose schema to read"
    interpreter = shebang[2:].split()
    where = subprocess.run([*interpreter, "-c", "import compose.config, os; print(os.path.dirname(compose.config.__file__))"],
                           capture_output=True, text=True, timeout=60, check=True)
    schema: dict[str, Any] = json.loads((Path(where.stdout.strip()) / "compose_spec.json").read_text(encoding="utf-8"))
    return schema


def docker_bytes(text: str) -> int:
    """A Docker memory size (``2G``, ``512m``, ``1gb``) in bytes."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([bkmgt]?)b?", text.strip().lower())
    assert match, f"not a Docker memory size: {text!r}"
    return int(float(match.group(1)) * _DOCKER_UNITS[match.group(2)])


def option(command: list[str], name: str) -> str:
    """The value after ``name`` in an exec-form command (``--port 8400`` or ``--port=8400``)."""
    for i, part in enumerate(command):
        if part == name:
            return command[i + 1]
        if part.startswith(name + "="):
            return part.split("=", 1)[1]
    raise AssertionError(f"{command} has no {name}")
