"""The AGENTSOCIETY_* variables as the run's LLM clients, limits and home (no LLM, no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.reference import ReferenceSettings, load_reference
from engine.settings import EngineSettings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference"


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith(("AGENTSOCIETY_", "POLIS_")):
            monkeypatch.delenv(name)


def test_without_variables_the_spec_keeps_its_defaults():
    spec = load_reference(EXAMPLE / "init_config.json", EXAMPLE / "steps.yaml")
    applied = ReferenceSettings().apply(spec)
    assert applied.llm == spec.llm and (applied.batch_size, applied.max_workers) == (256, None)
    limits = ReferenceSettings().limiter_config(EngineSettings())
    assert (limits.concurrency, limits.latency_degrade_factor, limits.slow_latency_ms, limits.timeout_s) == (16, 4.0, None, 60.0)


def test_llm_variables_name_the_key_variable_and_the_coder_falls_back_field_by_field(monkeypatch):
    monkeypatch.setenv("AGENTSOCIETY_LLM_MODEL", "qwen2.5-7b")
    monkeypatch.setenv("AGENTSOCIETY_LLM_API_BASE", "http://gpu:8000/v1")
    monkeypatch.setenv("AGENTSOCIETY_LLM_API_KEY", "sk-secret")
    llm = ReferenceSettings().llm_spec()
    assert llm is not None and llm.coder is None
    assert (llm.default.model, llm.default.base_url, llm.default.api_key_env) == (
        "openai/qwen2.5-7b", "http://gpu:8000/v1", "AGENTSOCIETY_LLM_API_KEY")
    monkeypatch.setenv("AGENTSOCIETY_CODER_LLM_MODEL", "qwen-coder")
    coder = ReferenceSettings().llm_spec().coder
    assert (coder.model, coder.base_url, coder.api_key_env) == ("openai/qwen-coder", "http://gpu:8000/v1", "AGENTSOCIETY_LLM_API_KEY")
    monkeypatch.setenv("AGENTSOCIETY_CODER_LLM_API_KEY", "sk-other")
    assert ReferenceSettings().llm_spec().coder.api_key_env == "AGENTSOCIETY_CODER_LLM_API_KEY"
    assert "sk-" not in ReferenceSettings().apply(load_reference(EXAMPLE / "init_config.json", EXAMPLE / "steps.yaml")).model_dump_json()


def test_limits_batches_and_home_come_from_the_variables_unless_a_polis_variable_is_set(monkeypatch, tmp_path):
    for name, value in {"LLM_RAY_CONCURRENCY": "4", "LLM_LATENCY_DEGRADE_FACTOR": "6", "LLM_SLOW_LATENCY_MS": "900",
                        "LLM_REQUEST_TIMEOUT": "30", "LLM_RAY_MAX_WORKERS": "3", "BATCH_SIZE": "8",
                        "HOME_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(f"AGENTSOCIETY_{name}", value)
    ref = ReferenceSettings()
    limits = ref.limiter_config(EngineSettings())
    assert (limits.concurrency, limits.latency_degrade_factor, limits.slow_latency_ms, limits.timeout_s) == (4, 6.0, 900.0, 30.0)
    spec = ref.apply(load_reference(EXAMPLE / "init_config.json", EXAMPLE / "steps.yaml"))
    assert (spec.batch_size, spec.max_workers) == (8, 3)
    assert ref.template_cache_dir(EngineSettings()) == tmp_path.resolve() / "codegen_cache"
    monkeypatch.setenv("POLIS_LLM_CONCURRENCY", "32")
    monkeypatch.setenv("POLIS_HOME", str(tmp_path / "polis"))
    polis = EngineSettings()
    assert ref.limiter_config(polis).concurrency == 32
    assert ref.template_cache_dir(polis) == tmp_path / "polis" / "codegen_cache"


def test_embedding_variables_are_named_as_unused(monkeypatch):
    monkeypatch.setenv("AGENTSOCIETY_EMBEDDING_MODEL", "bge-m3")
    monkeypatch.setenv("AGENTSOCIETY_EMBEDDING_DIMS", "1024")
    assert ReferenceSettings().unused() == ["AGENTSOCIETY_EMBEDDING_MODEL", "AGENTSOCIETY_EMBEDDING_DIMS"]
