"""Everything the results page shows, read from a run directory (or a sweep root) into plain values.

:func:`load_report` reads the run's JSON files (``SOCIETY.json``, ``SOCIETY_STEP.json``; a sweep's
``SWEEP.json``) and its datasets through the engine's read-only
:class:`~engine.storage.reader.ReplayReader`; it writes nothing. The result, :class:`ReportData`, is
what the service's plots (``service.report.plots``) draws and what ``GET /experiments/{id}/report/data`` answers (as
:meth:`ReportData.to_json`), so the served page's live updates and the standalone file show the same values.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engine.errors import NotARunError
from engine.results.series import (
    ANSWERS_SQL,
    CASCADE_CCDF_SQL,
    DEGREE_CCDF_SQL,
    ENV_METRICS_SQL,
    FAMILIES,
    FIDELITY_SQL,
    NETWORK_FIT_SQL,
    NETWORK_MEASURES_SQL,
    SURVEY_SHARES_SQL,
    TIER_COMPARISON_SQL,
    Line,
    Panel,
    answer_panels,
    env_panels,
    network_panels,
    panels_of,
    survey_panels,
)
from engine.society.status import read_society
from engine.storage.atomic import read_json
from engine.storage.query_limits import QueryLimits
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import (
    MANIFEST_FILE,
    SOCIETY_FILE,
    SOCIETY_STEP_FILE,
    RunLocation,
    as_location,
    run_name,
    run_store,
)
from engine.storage.sweep_layout import SWEEP_FILE, TIER_COMPARISON_FILE, SweepManifest

__all__ = ["DatasetEntry", "ReportData", "is_run_dir", "load_report", "without_local_paths"]

#: Errors listed on the page at most (the ``actions`` dataset holds them all).
MAX_ERRORS = 20


@dataclass(frozen=True)
class DatasetEntry:
    """One dataset of the catalog, for the page's dataset browser."""

    name: str
    kind: str
    description: str
    rows: int
    columns: tuple[dict[str, str], ...]  #: ``{"name", "type", "description"}`` each


@dataclass(frozen=True)
class ReportData:
    """What the results page of one run or sweep shows."""

    title: str  #: the experiment's name
    summary: dict[str, Any]  #: status, spec summary, timings, usage: label -> value, in page order
    errors: tuple[dict[str, Any], ...]  #: the first failed agent-steps and LLM calls
    panels: tuple[Panel, ...]  #: every plot, in page order
    datasets: tuple[DatasetEntry, ...]
    cells: tuple[dict[str, Any], ...] = ()  #: a sweep's cells (index, params, seed, status); empty for a run
    extra: dict[str, Any] = field(default_factory=dict)  #: what the caller adds (the service: owner, id, timings)
    #: a survey run's scored figures (its ``fidelity`` dataset: item, metric, group, value, interval, gap, n)
    fidelity: tuple[dict[str, Any], ...] = ()
    #: a run's generated layers against their models (its ``network_fit`` dataset)
    network_fit: tuple[dict[str, Any], ...] = ()
    #: a sweep over tier mixes: each mix's cost against fidelity (its ``tier_comparison`` view)
    tier_comparison: tuple[dict[str, Any], ...] = ()

    @property
    def is_sweep(self) -> bool:
        """The data is a sweep's (one line per cell)."""
        return bool(self.cells)

    def to_json(self) -> dict[str, Any]:
        """The data as JSON-ready values (NaN becomes null)."""
        return _json_safe(asdict(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReportData:
        """Rebuild the data from :meth:`to_json`'s output (as ``GET .../report/data`` answers it under ``report``)."""

        def line(item: dict[str, Any]) -> Line:
            # JSON turned the bars' (answer, cell) pairs into lists, and NaN (no value at a step) into null.
            return Line(label=item["label"], x=tuple(tuple(x) if isinstance(x, list) else x for x in item["x"]),
                        y=tuple(math.nan if y is None else y for y in item["y"]))

        panels = tuple(Panel(**{**panel, "lines": tuple(line(item) for item in panel["lines"])}) for panel in data["panels"])
        datasets = tuple(DatasetEntry(**{**entry, "columns": tuple(entry["columns"])}) for entry in data["datasets"])
        return cls(title=data["title"], summary=data["summary"], errors=tuple(data["errors"]), panels=panels,
                   datasets=datasets, cells=tuple(data.get("cells", ())), extra=data.get("extra", {}),
                   fidelity=tuple(data.get("fidelity", ())), network_fit=tuple(data.get("network_fit", ())),
                   tier_comparison=tuple(data.get("tier_comparison", ())))


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def is_run_dir(path: RunLocation) -> bool:
    """``path`` holds a run (``SOCIETY.json`` or ``SOCIETY_STEP.json``) or a sweep (``SWEEP.json``, local only)."""
    where = as_location(path)
    if isinstance(where, Path) and (where / SWEEP_FILE).is_file():
        return True
    store = run_store(where)
    return store.exists(SOCIETY_FILE) or store.exists(SOCIETY_STEP_FILE)


def _spec_of(doc: dict[str, Any]) -> dict[str, Any]:
    # SOCIETY.json and SWEEP.json keep the spec as a dict; older runs kept its Python repr.
    spec = doc.get("spec")
    if isinstance(spec, str):
        try:
            spec = ast.literal_eval(spec)
        except (ValueError, SyntaxError):
            return {}
    return spec if isinstance(spec, dict) else {}


def _questions(spec: dict[str, Any]) -> dict[tuple[int, str], dict[str, Any]]:
    """The spec's questionnaire questions by (step index, question id)."""
    return {(index, str(question.get("id"))): question for index, step in enumerate(spec.get("steps") or [])
            if isinstance(step, dict) for question in step.get("questions") or [] if isinstance(question, dict)}


def _spec_summary(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec in a few lines: seed, agents, LLM models, env modules and the steps."""
    population = spec.get("population") or []
    # A table's population without a count has one member per row.
    agents = len(spec.get("agents") or []) + sum(int(p.get("count") or len(p.get("rows") or [])) for p in population)
    llm = {role: conf.get("model") for role, conf in (spec.get("llm") or {}).items() if isinstance(conf, dict)}
    env = spec.get("environment") or {}
    steps = []
    for step in spec.get("steps") or []:
        if step.get("type") == "run":
            steps.append(f"run {step.get('num_steps')} × {step.get('tick')} s")
        else:
            steps.append(" ".join(str(p) for p in (step.get("type"), step.get("questionnaire_id")) if p))
    return {
        "seed": spec.get("seed"),
        "agents": agents,
        "LLM": ", ".join(f"{role}: {model}" for role, model in llm.items() if model),
        "env modules": ", ".join(str(m.get("type")) for m in env.get("modules") or []),
        "router": env.get("router"),
        "steps": "; ".join(steps),
    }


def _rows(reader: ReplayReader, sql: str) -> list[dict[str, Any]]:
    return reader.query(sql).to_pylist()


def _has_rows(reader: ReplayReader, view: str) -> bool:
    if view != "spans" and view not in reader.datasets():
        return False
    return bool(_rows(reader, f'SELECT 1 AS one FROM "{view}" LIMIT 1'))


def _cell_labels(sweep: SweepManifest) -> dict[int, str]:
    def short(path: str) -> str:
        return path.rsplit(".", 1)[-1]

    return {
        c.index: f"cell {c.index}: " + ", ".join(f"{short(p)}={c.params.get(p)}" for p in sweep.params)
        + (f" (rep {c.replication})" if any(x.replication for x in sweep.cells) else "")
        for c in sweep.cells
    }


def _usage(reader: ReplayReader, cell: str) -> dict[str, Any]:
    if "llm_calls" not in reader.datasets():
        return {"LLM calls": 0}
    (row,) = _rows(reader, (
        "SELECT count(*) AS calls, coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens, "
        "coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens, coalesce(sum(cost_usd), 0) AS cost_usd, "
        "count(*) FILTER (WHERE status IS DISTINCT FROM 'ok') AS failed FROM llm_calls"
    ))
    return {"LLM calls": row["calls"], "failed LLM calls": row["failed"], "input tokens": row["input_tokens"],
            "output tokens": row["output_tokens"], "cost (USD)": round(float(row["cost_usd"]), 6)}


def _errors(reader: ReplayReader, cell: str) -> tuple[dict[str, Any], ...]:
    found: list[dict[str, Any]] = []
    if "actions" in reader.datasets():
        found += _rows(reader, (
            f"SELECT {cell} AS cell, 'agent-step' AS source, step, agent_id, status, error FROM actions "
            f"WHERE status IN ('error', 'llm_error') OR error IS NOT NULL ORDER BY step, agent_id LIMIT {MAX_ERRORS}"
        ))
    if "llm_calls" in reader.datasets():
        found += _rows(reader, (
            f"SELECT {cell} AS cell, 'LLM call' AS source, step, agent_id, status, error FROM llm_calls "
            f"WHERE status IS DISTINCT FROM 'ok' ORDER BY step, agent_id LIMIT {MAX_ERRORS}"
        ))
    return tuple({**row, "error": without_local_paths(row["error"])} for row in found[:MAX_ERRORS])


_TRACEBACK_FILE = re.compile(r'File "([^"]+)"')
_PACKAGE_ROOTS = ("engine", "service", "polis", "site-packages")


def without_local_paths(text: str | None) -> str | None:
    """``text`` with each traceback's file named from its package (``engine/society/batch.py``), never by the server's
    path to it: a results page is attached to papers."""
    if text is None:
        return None

    def relative(match: re.Match[str]) -> str:
        parts = PurePosixPath(match.group(1).replace("\\", "/")).parts
        at = max((i for i, part in enumerate(parts) if part in _PACKAGE_ROOTS), default=len(parts) - 1)
        return f'File "{"/".join(parts[at + (parts[at] == "site-packages"):])}"'

    return _TRACEBACK_FILE.sub(relative, text)


def _timings(reader: ReplayReader, status: dict[str, Any]) -> dict[str, Any]:
    (row,) = _rows(reader, (
        "SELECT min(start_unix_ms) AS first_ms, max(start_unix_ms + duration_ms) AS last_ms, "
        "sum(duration_ms) FILTER (WHERE name = 'tick') AS ticks_ms FROM spans"
    ))
    timings: dict[str, Any] = {"ticks done": status.get("step_count"), "agent-steps done": status.get("agent_steps_done"),
                               "simulated time": status.get("current_time")}
    if row["first_ms"] is not None:
        timings["traced wall time (s)"] = round((row["last_ms"] - row["first_ms"]) / 1000, 2)
    if row["ticks_ms"] is not None:
        timings["ticks' wall time (s)"] = round(row["ticks_ms"] / 1000, 2)
    return timings


def _manifest(run_dir: Path | str) -> dict[str, Any]:
    """The manifest's lines of the summary: Polis's version and commit, and the served models per requested model."""
    manifest = run_store(run_dir).get_json(MANIFEST_FILE, None) or {}
    if not manifest:
        return {}
    polis = manifest.get("polis") or {}
    commit = polis.get("commit")
    served = "; ".join(
        f"{requested}: " + ", ".join(f"{name} ×{count}" for name, count in (entry.get("served") or {}).items())
        + (" (fingerprints " + ", ".join(entry.get("fingerprints") or {}) + ")" if entry.get("fingerprints") else "")
        for requested, entry in (manifest.get("models") or {}).items()
    )
    fork = manifest.get("fork")
    return {"polis version": polis.get("version"),
            "polis commit": f"{commit[:12]}{' (dirty)' if polis.get('dirty') else ''}" if commit else None,
            "served models": served or None,
            # the parent by its name: a page is attached to papers, and must not carry a local path or a bucket
            **({"forked from": f"{run_name(fork['parent'])} at tick {fork['at_step']}"} if fork else {})}


def _datasets(reader: ReplayReader) -> tuple[DatasetEntry, ...]:
    return tuple(
        DatasetEntry(name, s.kind, s.description, reader.count(name),
                     tuple({"name": c.name, "type": c.type, "description": c.description} for c in s.columns))
        for name in reader.datasets() for s in (reader.schema(name),)
    )


def load_report(run_dir: RunLocation, limits: QueryLimits | None = None, extra: dict[str, Any] | None = None) -> ReportData:
    """Read what the results page shows from a run directory or a sweep root.

    Args:
        run_dir: the run directory, or a sweep root (``SWEEP.json``): its series get one line per cell.
        limits: the reader's query limits (the service's ``POLIS_QUERY_*``); None = the reader's defaults.
        extra: what the caller knows besides the run directory (the service: id, owner, its timings);
            shown first in the summary (its ``status``, if any, replaces the run's).

    Returns:
        The page's data. A run that has written nothing yet has a status and no panels.

    Raises:
        NotARunError: ``run_dir`` holds no run and no sweep.
        StorageError: the catalog or manifest is malformed.
        QueryError: a dataset could not be read within the limits.
    """
    run_dir = as_location(run_dir)
    if not is_run_dir(run_dir):
        raise NotARunError(f"{run_dir} is not a run directory (no SOCIETY.json, SOCIETY_STEP.json or {SWEEP_FILE})")
    with ReplayReader(run_dir, limits) as reader:
        sweep = reader.sweep
        cell = "cell" if sweep is not None else "0"
        if sweep is None:
            society = read_society(run_dir) or {}
            status = run_store(run_dir).get_json(SOCIETY_STEP_FILE, None) or {}
            cells: tuple[dict[str, Any], ...] = ()
            labels = None
        else:
            assert isinstance(run_dir, Path)  # a sweep root is a local directory
            society = read_json(run_dir / SWEEP_FILE, default={}) or {}
            states = [str(c.status) for c in sweep.cells]
            status = {"status": ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states)))}
            cell_labels = _cell_labels(sweep)
            labels = cell_labels.__getitem__
            cells = tuple({"cell": c.index, "label": cell_labels[c.index], "seed": c.seed, "status": str(c.status),
                           "error": c.error, **{f"param {p}": c.params.get(p) for p in sweep.params}} for c in sweep.cells)
        spec = _spec_of(society)
        # The caller's values come first and win (the service's record knows ``queued`` before the run does).
        summary: dict[str, Any] = {"status": status.get("status", "unknown"), **(extra or {})}
        if status.get("error"):
            summary["error"] = without_local_paths(status["error"])
        if sweep is not None:
            summary["cells"] = len(sweep.cells)
            summary["grid"] = ", ".join(sweep.params)
        summary.update({"spec hash": society.get("spec_hash"), **_spec_summary(spec)})
        summary.update(_timings(reader, status) if sweep is None else {})
        summary.update(_usage(reader, cell))
        summary.update(_manifest(run_dir))
        panels: list[Panel] = []
        for family in FAMILIES:
            if _has_rows(reader, family.dataset):
                panels += panels_of(family, _rows(reader, family.sql.format(cell=cell)), labels)
        if _has_rows(reader, "env_metrics"):
            panels += env_panels(_rows(reader, ENV_METRICS_SQL.format(cell=cell)), labels)
        if _has_rows(reader, "questionnaire_answers"):
            panels += answer_panels(_rows(reader, ANSWERS_SQL.format(cell=cell)), labels, _questions(spec))
        if sweep is None and _has_rows(reader, "survey_answers") and _has_rows(reader, "questionnaire_answers"):
            panels += survey_panels(_rows(reader, SURVEY_SHARES_SQL), _questions(spec))
        fidelity = tuple(_rows(reader, FIDELITY_SQL)) if sweep is None and _has_rows(reader, "fidelity") else ()
        if sweep is None:
            panels += network_panels(*(_rows(reader, sql) if _has_rows(reader, view) else [] for sql, view in (
                (CASCADE_CCDF_SQL, "social_cascades"), (DEGREE_CCDF_SQL, "network_edges"), (NETWORK_MEASURES_SQL, "network_measures"))))
        network_fit = tuple(_rows(reader, NETWORK_FIT_SQL)) if sweep is None and _has_rows(reader, "network_fit") else ()
        compared = sweep is not None and (sweep.root / TIER_COMPARISON_FILE).is_file()
        tier_comparison = tuple(_rows(reader, TIER_COMPARISON_SQL)) if compared else ()
        return ReportData(
            title=str(society.get("name") or run_name(run_dir)), summary={k: v for k, v in summary.items() if v not in (None, "")},
            errors=_errors(reader, cell), panels=tuple(panels), datasets=_datasets(reader), cells=cells, extra=dict(extra or {}),
            fidelity=fidelity, network_fit=network_fit, tier_comparison=tier_comparison,
        )
