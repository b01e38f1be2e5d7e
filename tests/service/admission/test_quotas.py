"""The edges quota (issue 50): a network whose generators expect more edges than the owner may have is refused at the
field that asks for them, from the raw counts, before the spec is validated or anything is generated."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.admission.intake import Intake
from service.admission.quotas import OwnerQuota, QuotaOverride, Quotas, check_counts
from service.admission.spec_counts import SpecCounts
from service.errors import QuotaExceededError
from service.settings import ServiceSettings

QUOTA = OwnerQuota(max_agents=10_000, max_agent_steps=10**6, max_concurrent=2, max_disk_bytes=10**9)


def wedge(**generate: Any) -> dict[str, Any]:
    """Issue 50's spec: 3,000 agents on one generated layer (by default an Erdős–Rényi graph of p = 1)."""
    return {"name": "wedge", "population": [{"count": 3000}], "steps": [{"type": "run", "num_steps": 1}],
            "network": {"layers": {"friend": {"generate": generate or {"model": "erdos_renyi", "p": 1.0}}}}}


def test_the_default_edges_quota_is_a_few_million_from_polis_quota_max_edges() -> None:
    assert QUOTA.max_edges == ServiceSettings.model_construct().quota_max_edges == 2_000_000
    assert ServiceSettings(quota_max_edges=7).quota_max_edges == 7
    assert Quotas.from_settings(ServiceSettings(quota_max_edges=7)).for_owner("anyone").max_edges == 7


def test_edges_over_the_quota_are_refused_naming_the_layer_and_the_setting() -> None:
    counts = SpecCounts(agents=3000, agent_steps=3000, edges=4_498_500, layer_edges=(("kin", 500), ("friend", 4_498_000)))
    with pytest.raises(QuotaExceededError) as caught:
        check_counts(counts, QUOTA, "lab-a")
    assert caught.value.path == "network.layers.friend.generate"
    assert "expect 4,498,500 edges over 3000 agents" in str(caught.value)
    assert "owner 'lab-a' may have at most 2000000 edges (quota max_edges, default from POLIS_QUOTA_MAX_EDGES)" in str(caught.value)
    check_counts(counts, OwnerQuota(**{**QUOTA.__dict__, "max_edges": 4_498_500}), "lab-a")  # at the limit: accepted


@pytest.mark.parametrize("generate", [
    {"model": "erdos_renyi", "p": 1.0},
    {"model": "barabasi_albert", "m": 1500},
    {"model": "configuration", "distribution": {"2999": 1}},
])
def test_issue_50s_generators_are_refused_at_admission_before_validation(generate: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import service.admission.intake as intake_module

    def no_validation(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the spec was validated: the quota should have refused its raw counts first")

    monkeypatch.setattr(intake_module, "parse_spec", no_validation)
    with pytest.raises(QuotaExceededError) as caught:
        Intake().admit(json.dumps(wedge(**generate)).encode(), "json", "lab-a")
    assert caught.value.path == "network.layers.friend.generate" and "POLIS_QUOTA_MAX_EDGES" in str(caught.value)


def test_a_sweep_that_raises_p_is_refused_at_its_grid_key_and_a_grant_lifts_the_quota() -> None:
    data = wedge(model="erdos_renyi", p=0.01)
    data["sweep"] = {"grid": {"network.layers.friend.generate.p": [0.01, 0.9]}}
    with pytest.raises(QuotaExceededError) as caught:
        Intake().admit(json.dumps(data).encode(), "json", "lab-a")
    assert caught.value.path == "sweep.grid.network.layers.friend.generate.p"
    granted = Intake(quotas=Quotas(QUOTA, {"lab-a": QuotaOverride(max_edges=5_000_000)}))
    assert granted.admit(json.dumps(data).encode(), "json", "lab-a").network is not None
    with pytest.raises(QuotaExceededError):
        granted.admit(json.dumps(data).encode(), "json", "lab-b")
