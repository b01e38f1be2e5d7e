"""``deploy/Dockerfile`` builds from what the repository has: every COPY source exists and is in the build context.

No Docker daemon runs here, so the image is checked by reading the Dockerfile against the
repository and ``.dockerignore``, and against what ``docker-compose.yml`` expects of the image (the
build context, ``examples/`` in the working directory, ``python`` for the healthchecks, a user that
is not root).
"""

from __future__ import annotations

import fnmatch
import re
import shlex

from tests.deploy.compose import ROOT, raw_compose

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def ignored() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def is_ignored(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) or path.startswith(pattern.rstrip("/") + "/") for pattern in ignored())


def copies() -> list[tuple[list[str], str]]:
    """Each COPY's sources and destination (flags such as ``--chown`` left out)."""
    found = []
    for word, rest in instructions():
        if word == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            found.append((parts[:-1], parts[-1]))
    return found


def test_compose_builds_this_dockerfile_from_the_repository_root():
    builds = {(svc["build"]["context"], svc["build"]["dockerfile"]) for svc in raw_compose()["services"].values()}
    assert builds == {(".", "deploy/Dockerfile")}


def test_every_copy_source_exists_and_is_not_ignored_by_dockerignore():
    sources = [source for sources, _ in copies() for source in sources]
    assert {"pyproject.toml", "README.md", "engine", "service", "polis", "examples"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not is_ignored(source), source


def test_keys_and_local_state_stay_out_of_the_build_context():
    for path in (".env", ".venv", ".git", "runs", "engine/__pycache__"):
        assert is_ignored(path), path


def test_polis_is_installed_from_the_copied_checkout_and_examples_sit_in_the_working_directory():
    steps = instructions()
    assert ("RUN", "pip install . && rm -rf build *.egg-info") in steps
    workdir = [rest for word, rest in steps if word == "WORKDIR"]
    assert workdir == ["/app"]
    assert (["examples"], "./examples") in copies()  # so `polis run examples/demo.yaml` works in the container


def test_the_image_has_python_for_the_healthchecks_and_runs_as_a_user_who_owns_the_volume_path():
    steps = instructions()
    assert steps[0][0] == "FROM" and steps[0][1].startswith("python:3.11")
    users = [rest for word, rest in steps if word == "USER"]
    assert users == ["polis"]
    setup = next(rest for word, rest in steps if word == "RUN" and "useradd" in rest)
    assert "useradd --create-home --uid 1000 polis" in setup and "chown polis:polis /data" in setup
    healthchecks = [svc["healthcheck"]["test"] for svc in raw_compose()["services"].values()]
    assert {tuple(test[:2]) for test in healthchecks} == {("CMD", "python")}
