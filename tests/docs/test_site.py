"""The docs site builds with ``mkdocs build --strict``, and its reference pages hold what the code defines.

The spec, settings and API pages are generated at build time (docs/hooks.py); these tests read the names
they must show from the models themselves, so a page that stops being generated, or drifts, fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import polis
from engine.settings import EngineSettings
from engine.spec import ExperimentSpec
from engine.spec_schema import spec_json_schema
from service.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=170, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_the_spec_reference_has_a_section_per_model_and_a_row_per_field(site: Path) -> None:
    html = page(site, "reference/spec")
    # The schema as a fresh process sees it: agent types other tests register in this one are not on the page.
    printed = subprocess.run([sys.executable, "-m", "engine.cli", "spec-schema"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, check=True)
    schema = json.loads(printed.stdout)
    assert set(schema["$defs"]) <= set(spec_json_schema()["$defs"])
    for model in [ExperimentSpec.__name__, *schema["$defs"]]:
        assert f'id="{model}"' in html, model
    for field in ExperimentSpec.model_fields:
        assert f"<code>{field}</code>" in html, field
    assert "<code>from</code>" in html  # a field shown by its alias (PopulationSpec.from_)
    assert 'href="#LLMSpec"' in html  # a nested model is a link to its section


def test_the_settings_reference_names_every_variable_with_its_default(site: Path) -> None:
    html = page(site, "reference/settings")
    for cls in (EngineSettings, ServiceSettings):
        assert f'id="{cls.__name__}"' in html
        for name, field in cls.model_fields.items():
            variable = field.validation_alias if isinstance(field.validation_alias, str) else f"POLIS_{name.upper()}"
            assert f"<code>{variable}</code>" in html, variable
    assert "<code>POLIS_GRANTS</code>" in html and "<code>POLIS_GRANTS_FILE</code>" not in html
    assert "<td><code>8400</code></td>" in html  # POLIS_PORT's default
    assert "remote scheduler address" in html  # a description, from the field's #: comment


def test_the_api_reference_documents_every_public_name(site: Path) -> None:
    html = page(site, "reference/api")
    missing = [name for name in polis.__all__ if f'id="polis.{name}"' not in html]
    assert missing == []
    assert ":class:" not in html and ":meth:" not in html  # Sphinx roles in docstrings show as code


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    for name in ("", "guide", "tutorial", "service", "operations", "compat", "internals", "architecture", "forks",
                 "limiter", "env_metrics", "minimal_agent", "deploy"):
        assert (site / name / "index.html").is_file(), name


def test_the_committed_reference_pages_are_what_the_code_generates_now() -> None:
    # A fresh interpreter: in this one, other tests may have registered agent and module types of their own.
    check = subprocess.run([sys.executable, str(ROOT / "docs" / "hooks.py"), "--check"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert check.returncode == 0, f"{check.stdout}{check.stderr}: run `make reference` and commit docs/reference"
    datasets = (ROOT / "docs" / "reference" / "datasets.md").read_text(encoding="utf-8")
    for name, column in (("social_cascades", "root_post_id"), ("social_actions", "intervention"), ("actions", "agent_id")):
        section = datasets.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert f"| `{column}` |" in section
