"""The per-step series of the results page: one SQL query per plot family over a run's (or a sweep's) views.

Every query answers rows ``(cell, sub, step, value)``: ``cell`` is the sweep cell (0 for a single run),
``sub`` names a series inside the family (an action status, ``p50``/``p95``, a token direction) and ``step``
is the tick. :func:`panels_of` turns those rows into :class:`Panel` values: for a run, one panel per family
with one line per ``sub``; for a sweep, one panel per ``sub`` with one line per cell, so a sweep's lines
compare cells. The env modules' own series (``env_metrics``, long format) and the questionnaire answers
have queries of their own, grouped by module and by question.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ANSWERS_SQL", "CASCADE_CCDF_SQL", "DEGREE_CCDF_SQL", "ENV_METRICS_SQL", "FAMILIES", "FIDELITY_SQL", "NETWORK_FIT_SQL",
           "NETWORK_MEASURES_SQL", "SURVEY_SHARES_SQL", "TIER_COMPARISON_SQL", "Family", "Line", "Panel", "answer_panels", "env_panels",
           "network_panels", "panels_of", "survey_panels"]


@dataclass(frozen=True)
class Line:
    """One series of a plot."""

    label: str  #: ``run``, a sub-series name, or a sweep cell's label
    x: tuple[Any, ...]  #: steps, or (bars) answer values / ``(answer, cell label)`` pairs
    y: tuple[float, ...]


@dataclass(frozen=True)
class Panel:
    """One plot of the page."""

    key: str  #: stable id: names its data sources in the page (``<key>/<line index>``)
    group: str  #: the page section it belongs to (``Run``, an env module, ``Questionnaire <id>``)
    title: str
    y_label: str
    lines: tuple[Line, ...]
    description: str = ""
    x_label: str = "step"
    bars: bool = False  #: categorical x (answer values) drawn as bars, not lines
    log: bool = False  #: both axes logarithmic (a distribution's tail)


@dataclass(frozen=True)
class Family:
    """A plot family of the ``Run`` section: its query and labels."""

    key: str
    title: str
    y_label: str
    dataset: str  #: the view it reads (``spans`` included); the family is skipped when that has no rows
    sql: str  #: ``{cell}`` is replaced by ``cell`` (sweep) or ``0`` (run)
    counts: bool = False  #: values are counts: a step a series has no row for counts 0 (it is not missing)


#: The ``Run`` section, in page order.
FAMILIES: tuple[Family, ...] = (
    Family("agent_steps", "Agent-steps by status", "agent-steps", "actions",
           "SELECT {cell} AS cell, status AS sub, step, count(*)::DOUBLE AS value FROM actions GROUP BY ALL", counts=True),
    Family("llm_calls", "LLM calls", "calls", "llm_calls",
           "SELECT {cell} AS cell, 'calls' AS sub, step, count(*)::DOUBLE AS value FROM llm_calls GROUP BY ALL"),
    Family("tokens", "LLM tokens", "tokens", "llm_calls",
           "SELECT {cell} AS cell, 'input' AS sub, step, sum(input_tokens)::DOUBLE AS value FROM llm_calls GROUP BY ALL "
           "UNION ALL SELECT {cell}, 'output', step, sum(output_tokens)::DOUBLE FROM llm_calls GROUP BY ALL"),
    Family("cost", "LLM cost", "USD", "llm_calls",
           "SELECT {cell} AS cell, 'cost' AS sub, step, coalesce(sum(cost_usd), 0)::DOUBLE AS value FROM llm_calls GROUP BY ALL"),
    # Cached replies answer in no time; they would pull the percentiles of the provider's latency down.
    Family("latency", "LLM latency (calls not served from the cache)", "ms", "llm_calls",
           "SELECT {cell} AS cell, 'p50' AS sub, step, quantile_cont(latency_ms, 0.5) AS value FROM llm_calls "
           "WHERE NOT coalesce(cached, false) AND latency_ms IS NOT NULL GROUP BY ALL "
           "UNION ALL SELECT {cell}, 'p95', step, quantile_cont(latency_ms, 0.95) FROM llm_calls "
           "WHERE NOT coalesce(cached, false) AND latency_ms IS NOT NULL GROUP BY ALL"),
    Family("prompt_p95", "Prompt tokens of a call by tier (p95)", "tokens", "token_telemetry",
           "SELECT {cell} AS cell, tier AS sub, step, prompt_p95::DOUBLE AS value FROM token_telemetry "
           "WHERE prompt_p95 IS NOT NULL AND tier != 'total'"),
    Family("prefix_share", "Prompt share a prefix cache can reuse", "share", "token_telemetry",
           "SELECT {cell} AS cell, tier AS sub, step, prefix_share AS value FROM token_telemetry WHERE prefix_share IS NOT NULL"),
    Family("tick_duration", "Tick duration", "seconds", "spans",
           "SELECT {cell} AS cell, 'tick' AS sub, CAST(attrs->>'step' AS BIGINT) AS step, duration_ms / 1000 AS value "
           "FROM spans WHERE name = 'tick'"),
)

#: A sweep over tier mixes: each mix's cost against its divergence from the all-LLM mix (the ``tier_comparison`` view).
TIER_COMPARISON_SQL = (
    "SELECT mix, replications, reference, calls_per_tick, calls_per_tick_low, calls_per_tick_high, tokens_per_tick, "
    "usd_per_tick, action_tvd, action_tvd_low, action_tvd_high, action_rate_ratio FROM tier_comparison"
)

#: ``env_metrics`` in long format: one series per (module, metric).
ENV_METRICS_SQL = (
    "SELECT {cell} AS cell, module, metric, any_value(description) AS description, step, avg(value) AS value "
    "FROM env_metrics WHERE value IS NOT NULL GROUP BY ALL ORDER BY module, metric, cell, step"
)

#: Answer counts of the questions with a countable answer; an answer that did not parse counts as ``(invalid)``.
ANSWERS_SQL = (
    "SELECT {cell} AS cell, questionnaire_id, step_index, question_id, "
    "CASE WHEN NOT coalesce(parse_success, false) THEN '(invalid)' "
    "WHEN response_type = 'integer' THEN CAST(value_int AS VARCHAR) "
    "WHEN response_type = 'float' THEN CAST(round(value_float, 2) AS VARCHAR) ELSE value_text END AS answer, "
    "count(*)::DOUBLE AS value FROM questionnaire_answers "
    "WHERE response_type IN ('integer', 'float', 'choice') GROUP BY ALL"
)


#: Per target item and label, the weighted answers: real (every respondent with one) and simulated (the last valid
#: answer of the same respondents).
SURVEY_SHARES_SQL = (
    "WITH sim AS (SELECT agent_id, question_id AS item, arg_max(value_text, step_index) AS label "
    "FROM questionnaire_answers WHERE parse_success GROUP BY ALL) "
    "SELECT s.item, 'real' AS side, s.label, sum(s.weight) AS value FROM survey_answers s WHERE s.label IS NOT NULL "
    "GROUP BY ALL UNION ALL "
    "SELECT s.item, 'simulated' AS side, m.label, sum(s.weight) AS value FROM survey_answers s "
    "JOIN sim m ON m.agent_id = s.agent_id AND m.item = s.item WHERE s.label IS NOT NULL GROUP BY ALL"
)
#: The scored figures, the whole sample's first.
FIDELITY_SQL = (
    "SELECT item, metric, group_by, \"group\", value, ci_low, ci_high, gap, n FROM fidelity "
    "ORDER BY group_by NULLS FIRST, \"group\" NULLS FIRST, item"
)


#: Each cascade's final size, as a CCDF: the share of cascades of at least each size.
CASCADE_CCDF_SQL = (
    "WITH last AS (SELECT root_post_id, arg_max(size, step) AS size FROM social_cascades GROUP BY root_post_id), "
    "counts AS (SELECT size, count(*) AS n FROM last GROUP BY size) "
    "SELECT size AS x, (sum(n) OVER (ORDER BY size DESC) / sum(n) OVER ())::DOUBLE AS y FROM counts ORDER BY size"
)
#: Each layer's degrees at the start (a directed layer's in-links, an undirected one's links), as a CCDF over the
#: agents with a link.
DEGREE_CCDF_SQL = (
    "WITH ends AS (SELECT layer, directed, target AS agent FROM network_edges WHERE step = 0 UNION ALL "
    "SELECT layer, directed, source FROM network_edges WHERE step = 0 AND NOT directed), "
    "degrees AS (SELECT layer, directed, agent, count(*) AS k FROM ends GROUP BY ALL), "  # a layer is directed or not
    "counts AS (SELECT layer, directed, k, count(*) AS n FROM degrees GROUP BY ALL) "
    "SELECT layer, directed, k AS x, "
    "(sum(n) OVER (PARTITION BY layer ORDER BY k DESC) / sum(n) OVER (PARTITION BY layer))::DOUBLE AS y "
    "FROM counts ORDER BY layer, k"
)
#: The per-step network measures in long format, the ones the page plots.
NETWORK_MEASURES_SQL = (
    "SELECT layer, step, measure, value FROM (UNPIVOT (SELECT layer, step, edges, mean_degree, in_degree_max, reciprocity, "
    "clustering, ei_index FROM network_measures) ON edges, mean_degree, in_degree_max, reciprocity, clustering, ei_index "
    "INTO NAME measure VALUE value) ORDER BY measure, layer, step"
)
#: The generated layers' fit to their models.
NETWORK_FIT_SQL = "SELECT layer, model, measure, target, achieved, note FROM network_fit ORDER BY layer, measure"


def network_panels(cascades: list[dict[str, Any]], degrees: list[dict[str, Any]], measures: list[dict[str, Any]]) -> list[Panel]:
    """The ``Network`` section of a run: the cascade size CCDF, each layer's degree CCDF at the start, and the
    measures over time (a line per layer)."""
    panels = []
    if cascades:
        line = Line("cascades", tuple(r["x"] for r in cascades), tuple(r["y"] for r in cascades))
        panels.append(Panel("network.cascades", "Network", "Cascade size (CCDF)", "share of cascades of at least this size",
                            (line,), description="each original post's reshare tree, at its last step", x_label="size", log=True))
    by_layer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in degrees:
        by_layer[row["layer"]].append(row)
    if by_layer:
        lines = tuple(Line(f"{layer} ({'in-degree' if rows[0]['directed'] else 'degree'})", tuple(r["x"] for r in rows),
                           tuple(r["y"] for r in rows)) for layer, rows in sorted(by_layer.items()))
        panels.append(Panel("network.degrees", "Network", "Degree at the start (CCDF)", "share of agents with at least k",
                            lines, description="a directed layer's in-links, an undirected layer's links; agents with a link",
                            x_label="degree k", log=True))
    series: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in measures:
        if row["value"] is not None:
            series[row["measure"]][row["layer"]][int(row["step"])] = float(row["value"])
    for measure, points in sorted(series.items()):
        title = "E-I index (external - internal ties, by group)" if measure == "ei_index" else measure.replace("_", " ")
        panels.append(Panel(f"network.{measure}", "Network", title, measure, _lines(points, sorted(points))))
    return panels


def _ordered_answers(answers: Iterable[str], choices: Sequence[str] = ()) -> list[str]:
    """A choice question's answers in the order of its choices (its scale), every choice shown even when nobody
    chose it; other answers: numbers in numeric order, then words in alphabetical order; ``(invalid)`` last."""
    place = {choice: i for i, choice in enumerate(choices)}

    def key(answer: str) -> tuple[int, float, str]:
        if answer == "(invalid)":
            return (3, 0.0, answer)
        if answer in place:
            return (0, float(place[answer]), answer)
        try:
            return (1, float(answer), answer)
        except ValueError:
            return (2, 0.0, answer)

    return sorted(set(answers) | set(choices), key=key)


def _lines(points: dict[str, dict[Any, float]], order: list[str]) -> tuple[Line, ...]:
    return tuple(
        Line(label, tuple(sorted(points[label])), tuple(points[label][x] for x in sorted(points[label])))
        for label in order if points.get(label)
    )


def panels_of(family: Family, rows: list[dict[str, Any]], cell_label: Callable[[int], str] | None) -> list[Panel]:
    """Build the panels of one family from its ``(cell, sub, step, value)`` rows.

    Args:
        family: the plot family.
        rows: the family query's rows; rows without a step or value are dropped.
        cell_label: for a sweep, the label of a cell's lines; None for a single run.

    Returns:
        One panel (a run) or one per sub-series (a sweep); none when no row has a value.
    """
    by_sub: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        if row["step"] is not None and row["value"] is not None:
            by_sub[str(row["sub"])][int(row["cell"])][int(row["step"])] = float(row["value"])
    if family.counts:
        steps: dict[int, set[int]] = defaultdict(set)
        for per_cell in by_sub.values():
            for cell, series in per_cell.items():
                steps[cell].update(series)
        for per_cell in by_sub.values():
            for cell, cell_steps in steps.items():  # every cell of the family, so a sweep's lines stay comparable
                series = per_cell[cell]
                series.update({step: 0.0 for step in cell_steps - set(series)})
    subs = sorted(by_sub)
    if cell_label is None:
        points = {sub: by_sub[sub][0] for sub in subs}
        return [Panel(family.key, "Run", family.title, family.y_label, _lines(points, subs))] if subs else []
    panels = []
    for sub in subs:
        points = {cell_label(cell): series for cell, series in by_sub[sub].items()}
        order = [cell_label(cell) for cell in sorted(by_sub[sub])]
        title = family.title if len(subs) == 1 else f"{family.title}: {sub}"
        key = family.key if len(subs) == 1 else f"{family.key}.{sub}"
        panels.append(Panel(key, "Run", title, family.y_label, _lines(points, order)))
    return panels


def env_panels(rows: list[dict[str, Any]], cell_label: Callable[[int], str] | None) -> list[Panel]:
    """One panel per env module metric (``env_metrics`` rows), grouped by module; a line per cell in a sweep."""
    series: dict[tuple[str, str], dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    descriptions: dict[tuple[str, str], str] = {}
    for row in rows:
        name = (str(row["module"]), str(row["metric"]))
        label = "run" if cell_label is None else cell_label(int(row["cell"]))
        series[name][label][int(row["step"])] = float(row["value"])
        descriptions.setdefault(name, row["description"] or "")
    panels = []
    for (module, metric), points in sorted(series.items()):
        order = sorted(points) if cell_label is None else [cell_label(c) for c in sorted({int(r["cell"]) for r in rows})]
        panels.append(Panel(f"env.{module}.{metric}", module, metric, metric, _lines(points, order),
                            description=descriptions[(module, metric)]))
    return panels


def survey_panels(rows: list[dict[str, Any]], questions: Mapping[tuple[int, str], Mapping[str, Any]]) -> list[Panel]:
    """One bar panel per target item of a survey: the real and the simulated answers' weighted shares side by side,
    in the item's scale order, titled with its question."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    shares: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        totals[(row["item"], row["side"])] += float(row["value"])
    for row in rows:
        shares[row["item"]][row["side"]][str(row["label"])] = float(row["value"]) / totals[(row["item"], row["side"])]
    by_id = {question_id: question for (_, question_id), question in questions.items()}
    panels = []
    for item in sorted(shares):
        asked = by_id.get(item, {})
        labels = _ordered_answers((a for side in shares[item].values() for a in side), asked.get("choices") or ())
        lines = tuple(Line(side, tuple((label, side) for label in labels), tuple(shares[item][side].get(label, 0.0) for label in labels))
                      for side in ("real", "simulated"))
        panels.append(Panel(f"fidelity.{item}", "Fidelity", f"{item}: real and simulated answers", "share", lines,
                            description=str(asked.get("prompt") or ""), x_label="answer", bars=True))
    return panels


def answer_panels(rows: list[dict[str, Any]], cell_label: Callable[[int], str] | None,
                  questions: Mapping[tuple[int, str], Mapping[str, Any]] | None = None) -> list[Panel]:
    """One bar panel per questionnaire question: answer counts; in a sweep, bars side by side per cell.

    ``questions``: the spec's questions by (step index, question id): a panel is titled with its question's text, and
    a choice question's bars stand in the order of its choices."""
    counts: dict[tuple[str, int, str], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        asked = (str(row["questionnaire_id"]), int(row["step_index"]), str(row["question_id"]))
        counts[asked][int(row["cell"])][str(row["answer"])] = float(row["value"])
    panels = []
    for (questionnaire, step_index, question), by_cell in sorted(counts.items()):
        question_spec = (questions or {}).get((step_index, question), {})
        answers = _ordered_answers((a for per in by_cell.values() for a in per), question_spec.get("choices") or ())
        lines = tuple(
            Line(
                "run" if cell_label is None else cell_label(cell),
                # a sweep's bars stand side by side: the x factor is (answer, cell)
                tuple(a if cell_label is None else (a, f"cell {cell}") for a in answers),
                tuple(by_cell[cell].get(a, 0.0) for a in answers),
            )
            for cell in sorted(by_cell)
        )
        panels.append(Panel(
            f"answers.{questionnaire}.{step_index}.{question}", f"Questionnaire {questionnaire}",
            f"{question} (spec step {step_index})", "agents", lines, x_label="answer", bars=True,
            description=str(question_spec.get("prompt") or ""),
        ))
    return panels
