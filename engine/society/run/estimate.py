"""``polis estimate``: a short dry run of every step kind on the simulated LLM, projected to the whole spec.

The sample keeps the spec's steps in order (run steps cut to a few ticks, questionnaires aimed at
the sampled agents, ask and intervene steps as they are) on agents spread over the population, and runs on the
simulated LLM. Its network is the sub-network among the sampled agents: each edge file's edges between two of
them (a file naming the others would refuse the sample), and a generator run over the sample where it fits so few
agents, else the whole generated graph's edges among them. Its ``llm_calls`` rows are grouped by what they grow with (:mod:`.projection`) and
projected to ranges of calls and tokens; dollars come from each client's ``price`` in the spec,
else litellm's price map for its model (:mod:`engine.llm.prices`), else stay unknown. A sweep is
the sum of its distinct cells (replications of a cell cost the same).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
from distributed import Client

from engine.env.prompts import WORLD_DESCRIPTION
from engine.errors import OverBudgetError, RunError
from engine.llm.prices import cost_usd
from engine.network.edges import layer_edges
from engine.network.spec import LayerSpec, NetworkSpec, generator_problem
from engine.run_status import is_finished
from engine.society.run.projection import Group, Range, over_budget, project, total
from engine.society.run.runner import run_experiment
from engine.society.shells import Shell
from engine.spec import AgentSpec, ExperimentSpec, LLMClientSpec, LLMSpec, PopulationSpec, QuestionnaireStep, RunStep, StepSpec
from engine.storage.reader import ReplayReader
from engine.sweep import expand_sweep
from engine.tiers.plan import TierBatch, deal_members, spec_tier_batches
from engine.tiers.spec import ArchetypeSpec

__all__ = ["KIND_NAMES", "Estimate", "estimate", "estimate_refusal", "refuse_over_budget", "span"]


@dataclass(frozen=True)
class Estimate:
    """Projected LLM usage of a whole spec (every step kind), from sample runs."""

    sample_agents: int
    sample_ticks: int  #: ticks per run step the sample ran (at most)
    agent_steps_total: int
    calls: Range
    tokens: Range  #: input plus output
    input_tokens: Range
    output_tokens: Range
    cost_usd: Range | None  #: None: some client's model has no price (the simulated LLM, a local one)
    calls_by_kind: dict[str, Range]  #: tick, tick-env, questionnaire, ask, intervene, once

    @property
    def projected_calls(self) -> int:
        return round(self.calls.expected)

    @property
    def projected_tokens(self) -> int:
        return round(self.tokens.expected)

    def report(self) -> str:
        """The estimate as ``polis estimate`` prints it: the sample, calls per step kind, the whole spec."""
        lines = [f"sample: {self.sample_agents} agents x {self.sample_ticks} ticks per run step, every step, on the simulated LLM"]
        lines.append("LLM calls of the whole spec, by what makes them:")
        lines += [f"  {KIND_NAMES.get(kind, kind)}: {span(calls)}" for kind, calls in self.calls_by_kind.items()]
        cost = "unknown (a model without a price; give llm.<role>.price in the spec)" if self.cost_usd is None else (
            f"{self.cost_usd.low:.4f}-{self.cost_usd.high:.4f} (expected {self.cost_usd.expected:.4f})")
        lines.append(f"whole spec ({self.agent_steps_total} agent-steps): ~{self.projected_calls} calls ({span(self.calls)}), "
                     f"~{self.projected_tokens} tokens ({span(self.tokens)}), USD {cost}")
        return "\n".join(lines)


#: How ``polis estimate`` names each kind of call (``Estimate.calls_by_kind``'s keys) in its report.
KIND_NAMES = {"tick": "agents, every tick", "tick-env": "the environment, every tick", "archetype": "archetype groups, every tick",
              "questionnaire": "questionnaires", "ask": "ask steps", "intervene": "intervene steps", "once": "once a run"}


def span(value: Range) -> str:
    """``low-high`` of a range of counts, or one number when both round alike."""
    return f"{value.low:,.0f}-{value.high:,.0f}" if round(value.low) != round(value.high) else f"{value.expected:,.0f}"


def _targets(step: QuestionnaireStep, ids: list[int]) -> list[int]:
    if step.target_agent_ids is None:
        return ids
    wanted = set(step.target_agent_ids)
    return [i for i in ids if i in wanted]


def _sample_spec(spec: ExperimentSpec, everyone: list[AgentSpec], batches: list[TierBatch], agents: int,
                 ticks: int) -> ExperimentSpec:
    """``spec`` on ``agents`` of its LLM agents (``everyone``) and each archetype population's first group (of
    ``batches``), each run step cut to ``ticks`` ticks, on the simulated LLM.

    The agents are spread evenly over the population (every n-th), so that a population whose
    members differ along its order (a persona table, several populations) is sampled across it.
    """
    count = min(agents, len(everyone))
    sample = [everyone[i * len(everyone) // count] for i in range(count)]
    ids = [a.id for a in sample]
    groups = _first_groups(batches, start=int(spec.agent_ids().max()) + 1)
    steps: list[StepSpec] = []
    for step in spec.steps:
        if isinstance(step, RunStep):
            steps.append(step.model_copy(update={"num_steps": min(ticks, step.num_steps)}))
        elif isinstance(step, QuestionnaireStep) and step.target_agent_ids is not None:
            # a questionnaire aimed at agents outside the sample asks a sampled one instead: the rate per agent is the same
            steps.append(step.model_copy(update={"target_agent_ids": _targets(step, ids) or ids[:1]}))
        else:
            steps.append(step)
    # A spec already on the simulated LLM keeps its own model (and so its exact answers).
    sim = spec.llm.default if spec.llm.default.is_sim else LLMClientSpec(model="sim/default:estimate")
    # Failures cost calls too: the sample measures what the steps spend, however they end.
    return spec.model_copy(update={
        "agents": sample, "population": groups, "budget": None, "sweep": None, "steps": steps,
        "llm": LLMSpec(default=sim, coder=sim), "max_error_rate": 1.0,
    })


def _first_groups(batches: list[TierBatch], start: int) -> list[PopulationSpec]:
    """Each archetype population's first group, as a population of its members' profiles (ids from ``start``): the
    sample's archetype calls, which the whole spec makes once per group per tick."""
    found: list[PopulationSpec] = []
    seen: set[int] = set()
    for batch in batches:  # by population; a population's first batch holds its first group first
        if not isinstance(batch.spec, ArchetypeSpec) or batch.population in seen:
            continue
        seen.add(batch.population)
        profiles = dict(zip(batch.agent_ids, batch.profiles, strict=True))
        rows = [profiles[i] for i in batch.groups[0].members]
        archetype = batch.spec
        if archetype.cluster is not None:  # the group's members, clustered again, are one cluster: one group, one call a tick
            archetype = archetype.model_copy(update={"cluster": archetype.cluster.model_copy(update={"count": 1})})
        found.append(PopulationSpec(rows=rows, tier="archetype", archetype=archetype, id_start=start))
        start += len(rows)
    return found


def _groups(spec: ExperimentSpec, llm_agents: list[AgentSpec], batches: list[TierBatch], sample: ExperimentSpec,
            rows: list[dict], sample_ticks: int) -> list[Group]:
    """The sample's call rows (per scope, step, caller, role) in the groups they project by: an LLM agent's by the
    spec's LLM agents (``llm_agents``), an archetype group's by its groups (those of ``batches``)."""
    full_ids = [a.id for a in llm_agents]
    sample_ids = [a.id for a in sample.agents]
    full_groups, sample_groups = sum(len(b.groups) for b in batches), len(sample.population)
    groups: dict[tuple[str, str, str], Group] = {}

    def group(kind: str, index: str, role: str, units: int, full: int) -> Group:
        return groups.setdefault((kind, index, role), Group(kind, role, units, full))

    for row in rows:
        scope, agent, role = row["scope"], row["agent_id"], row["role"] or "default"
        counts = (int(row["calls"]), int(row["input_tokens"]), int(row["output_tokens"]))
        if row["prompt_name"] == WORLD_DESCRIPTION.name:
            target = group("once", "", role, 1, 1)
            unit: object = "run"
        elif scope == "tick" and str(row["caller"]).startswith("archetype:"):
            target = group("archetype", "", role, sample_ticks * sample_groups, spec.total_ticks() * full_groups)
            unit = (row["caller"], row["step"])
        elif scope == "tick" and agent is not None:
            target = group("tick", "", role, sample_ticks * len(sample_ids), spec.total_ticks() * len(full_ids))
            unit = (agent, row["step"])
        elif scope == "tick":
            target = group("tick-env", "", role, sample_ticks, spec.total_ticks())
            unit = row["step"]
        elif scope.startswith("q"):
            step = spec.steps[int(scope[1:])]
            assert isinstance(step, QuestionnaireStep)
            sample_step = sample.steps[int(scope[1:])]
            assert isinstance(sample_step, QuestionnaireStep)
            target = group("questionnaire", scope, role, len(_targets(sample_step, sample_ids)), len(_targets(step, full_ids)))
            unit = agent
        else:
            # an ask or intervene step: the helper's plan and the env calls it makes, whatever the population's size
            kind, _, index = scope.partition("-")
            target = group(kind, index, role, 1, 1)
            unit = "step"
        target.add(unit, *counts)
    return list(groups.values())


def _client(spec: ExperimentSpec, role: str) -> LLMClientSpec:
    return (spec.llm.coder or spec.llm.default) if role == "coder" else spec.llm.default


def _cost(spec: ExperimentSpec, groups: list[Group]) -> Range | None:
    """The groups' dollars at each client's price (the spec's, else litellm's map); None: a client is unpriced."""
    low = expected = high = 0.0
    for group in groups:
        client = _client(spec, group.role)
        tokens = project(group)
        for pick in ("low", "expected", "high"):
            used_in, used_out = getattr(tokens["input_tokens"], pick), getattr(tokens["output_tokens"], pick)
            if client.price is not None:
                price = client.price.cost(used_in, used_out)
            else:
                found = cost_usd(client.model, round(used_in), round(used_out))
                if found is None:
                    return None
                price = found
            if pick == "low":
                low += price
            elif pick == "expected":
                expected += price
            else:
                high += price
    return Range(low, expected, high)


def _sample_network(spec: ExperimentSpec, sample: ExperimentSpec, folder: Path) -> NetworkSpec | None:
    """``spec``'s network over ``sample``'s agents: each edge file cut to the edges among them (written to ``folder``),
    each generated layer as it is where its generator fits the sample, else cut from the whole graph as well."""
    if spec.network is None:
        return None
    everyone, kept = spec.agent_ids(), sample.agent_ids()
    layers: dict[str, LayerSpec] = {}
    for name, layer in spec.network.layers.items():
        if layer.generate is not None and generator_problem(layer, len(kept)) is None:
            layers[name] = layer
            continue
        field = f"network.layers.{name}.from"
        edges = layer_edges(layer, name, everyone, spec.seed, path=Path(layer.from_) if layer.from_ else None, field=field,
                            persona=spec.persona_values)
        among = np.isin(edges.source, kept) & np.isin(edges.target, kept)
        columns = {"source": edges.source[among], "target": edges.target[among]}
        if edges.weight is not None:
            columns["weight"] = edges.weight[among]
        if edges.kind is not None:
            columns["type"] = edges.kind[among]
        path = folder / f"sample-{name}.csv"
        pa_csv.write_csv(pa.table(columns), path)
        layers[name] = layer.model_copy(update={"from_": str(path), "generate": None, "mutual": False})
    return NetworkSpec(layers=layers)


async def _estimate_one(spec: ExperimentSpec, cluster: Client | Shell, agents: int, ticks: int) -> Estimate:
    llm_agents, light = deal_members(spec, spec.agent_members())  # each member built once (2 s per 100,000)
    batches = spec_tier_batches(spec, light)  # and grouped once (a clustering takes seconds at a million)
    sample = _sample_spec(spec, llm_agents, batches, agents, ticks)
    sample_ticks = max((s.num_steps for s in sample.steps if isinstance(s, RunStep)), default=0)
    with tempfile.TemporaryDirectory(prefix="polis-estimate-") as tmp:
        sample = sample.model_copy(update={"network": _sample_network(spec, sample, Path(tmp))})
        summary = await run_experiment(sample, Path(tmp) / "run", cluster)
        if not is_finished(summary.status):
            raise RunError(f"the estimate's sample run ({len(sample.agents)} agents) did not complete: {summary.error}")
        with ReplayReader(Path(tmp) / "run") as reader:
            rows = reader.query(
                "SELECT split_part(call_id, '/', 2) AS scope, step, agent_id, caller, role, prompt_name, count(*) AS calls, "
                "coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens "
                "FROM llm_calls GROUP BY ALL"
            ).to_pylist() if "llm_calls" in reader.datasets() else []
    # every run step of the sample ran min(ticks, its length) ticks: the tick units are those
    ran_ticks = sum(s.num_steps for s in sample.steps if isinstance(s, RunStep))
    groups = _groups(spec, llm_agents, batches, sample, rows, ran_ticks)
    sums = total(groups)
    by_kind: dict[str, Range] = {}
    for group in groups:
        calls = project(group)["calls"]
        by_kind[group.kind] = by_kind[group.kind] + calls if group.kind in by_kind else calls
    return Estimate(
        sample_agents=len(sample.agents), sample_ticks=sample_ticks, agent_steps_total=spec.total_ticks() * len(spec.agent_ids()),
        calls=sums["calls"], tokens=sums["input_tokens"] + sums["output_tokens"], input_tokens=sums["input_tokens"],
        output_tokens=sums["output_tokens"], cost_usd=_cost(spec, groups), calls_by_kind=by_kind,
    )


def _sum(parts: list[tuple[Estimate, int]]) -> Estimate:
    first = parts[0][0]

    def add(pick: str) -> Range:
        ranges = [getattr(e, pick).times(n) for e, n in parts]
        return sum(ranges[1:], ranges[0])

    priced = [e.cost_usd.times(n) for e, n in parts if e.cost_usd is not None]
    kinds: dict[str, Range] = {}
    for part, n in parts:
        for kind, value in part.calls_by_kind.items():
            kinds[kind] = kinds[kind] + value.times(n) if kind in kinds else value.times(n)
    return Estimate(
        sample_agents=first.sample_agents, sample_ticks=first.sample_ticks,
        agent_steps_total=sum(e.agent_steps_total * n for e, n in parts), calls=add("calls"), tokens=add("tokens"),
        input_tokens=add("input_tokens"), output_tokens=add("output_tokens"),
        cost_usd=sum(priced[1:], priced[0]) if len(priced) == len(parts) else None,
        calls_by_kind=kinds,
    )


async def estimate(spec: ExperimentSpec, cluster: Client | Shell, *, agents: int = 20, ticks: int = 2) -> Estimate:
    """Run a sample of ``spec`` (every step kind) on the simulated LLM and project calls, tokens and dollars.

    Args:
        spec: the spec to estimate; a sweep is estimated cell by cell (each distinct cell once).
        cluster: where the sample runs (as for :func:`~engine.society.run.runner.run_experiment`).
        agents: how many of its agents the sample runs.
        ticks: how many ticks of each run step the sample runs.

    Raises:
        RunError: a sample run did not complete (the message says why).
    """
    if spec.sweep is None:
        return await _estimate_one(spec, cluster, agents, ticks)
    cells = expand_sweep(spec)
    distinct = Counter(cell.spec.model_copy(update={"seed": 0}).model_dump_json() for cell in cells)
    firsts = {cell.spec.model_copy(update={"seed": 0}).model_dump_json(): cell.spec for cell in reversed(cells)}
    parts = [(await _estimate_one(firsts[key], cluster, agents, ticks), count) for key, count in distinct.items()]
    return _sum(parts)


def estimate_refusal(spec: ExperimentSpec, found: Estimate) -> str | None:
    """Why ``spec`` should not start: the cap of its budget the upper estimate passes (None: none)."""
    return over_budget(spec.budget, found.calls, found.tokens, found.cost_usd)


async def refuse_over_budget(spec: ExperimentSpec, cluster: Client | Shell) -> None:
    """Before a run with a budget starts: estimate it, and refuse it when the upper estimate passes a cap.

    Raises:
        OverBudgetError: naming the cap and the estimate.
    """
    if spec.budget is None:
        return
    found = await estimate(spec, cluster)
    reason = estimate_refusal(spec, found)
    if reason is not None:
        raise OverBudgetError(f"not started: {reason} (estimate {span(found.calls)} calls, {span(found.tokens)} tokens); "
                              "raise the budget, or pass --force to run anyway")
