"""Scoring simulated answers against real ones, item by item, with bootstrap confidence intervals.

Sans-IO: :func:`score` takes each target item's paired answers (:class:`ItemAnswers`) and returns
the ``fidelity`` dataset's rows (:class:`Figure`). Per item, over every respondent with a real answer:

- ``coverage``: the share whose simulated answer is valid (the rest are left out of every other figure);
- ``tvd`` and ``jsd`` between the real and the simulated answer distributions, and for an ordinal
  item ``wasserstein`` (in scale steps);
- ``accuracy``: the share answering as the respondent did; for an ordinal item ``spearman`` too;
- ``item_normalized_accuracy``: the item's accuracy over its retest ceiling, people's own agreement with
  themselves when asked again, where the codebook gives it or the data has a retest (a ratio of two
  means over respondents: not Park et al.'s measure, below);
- per subgroup of a persona field (``by``), the same figures, each with its ``gap`` to the whole sample;
- across the ordinal items (``item`` ``*``), ``correlation_rmse`` between the real and the simulated
  Spearman correlation matrices (:func:`~engine.fidelity.metrics.correlation_errors`: a collapsed simulated
  item counts as no association), and ``correlation_pairs``, the number of item pairs it is over (pairs
  with a real correlation; no interval);
- across the items asked again (``item`` ``*``), ``normalized_accuracy``, Park et al. (2024)'s measure:
  each respondent's accuracy across those items over their own retest accuracy on them, averaged over
  respondents (:func:`~engine.fidelity.metrics.normalized_accuracy`). It needs each respondent's retest
  (a codebook ``retest_column``): a fixed ``retest`` ceiling says nothing of a person's own.

Every figure uses the survey weights, and carries a percentile bootstrap interval over respondents
(resampled with replacement, seeded): for a distance (TVD, JSD, Wasserstein, ``correlation_rmse``,
``variant_tvd``), shifted by the bootstrap's estimate of the plug-in's upward bias and starting at 0 when a
permutation test (each respondent's two answers swapped) finds no difference (:func:`_distance_interval`), so that it
covers the true distance, 0 included. And, for the distances, accuracy, Spearman and ``correlation_rmse``, a noise
floor: what it gives when the simulation is perfect and only the sampling noise of ``n`` answers is left
(:attr:`Figure.floor`; a distance's plug-in estimate sits near its floor, not near 0, when nothing differs). An item with fewer than 2 scored respondents, or whose simulated
answers share no option with its labels, is a :class:`~engine.errors.FidelityError` naming it: nothing
is ever scored as 0 for want of data.

A caller that must be able to stop a scoring (a time limit, a cancel) passes a :data:`Checkpoint`, called
before each resample: whatever it raises ends the scoring.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.errors import FidelityError
from engine.fidelity.metrics import (
    accuracy,
    correlation_errors,
    correlation_rmse,
    distribution,
    jsd,
    normalized_accuracy,
    spearman,
    tvd,
    wasserstein,
)

__all__ = ["Checkpoint", "Figure", "ItemAnswers", "compare_variant", "no_checkpoint", "score"]

#: No answer, in a positions array.
NONE = -1


@dataclass(frozen=True)
class ItemAnswers:
    """One target item: each respondent's real and simulated answer as positions among ``labels`` (-1: none)."""

    item: str
    labels: tuple[str, ...]  #: in scale order
    ordinal: bool
    agents: np.ndarray  #: the agent standing for each respondent
    real: np.ndarray
    simulated: np.ndarray
    weights: np.ndarray
    retest: np.ndarray | None = None  #: the same item asked again (-1: not asked), where the data has it
    ceiling: float | None = None  #: people's test-retest accuracy on the item, where it is known
    groups: dict[str, np.ndarray] = field(default_factory=dict)  #: persona field -> each respondent's value (None: none)
    unmatched: int = 0  #: valid simulated answers that are none of the labels (the item was asked with other options)


@dataclass(frozen=True)
class Figure:
    """One row of the ``fidelity`` dataset."""

    item: str  #: the item, or ``*`` for a figure across items
    metric: str
    value: float | None  #: None: the figure does not exist here (a constant answer has no correlation)
    ci_low: float | None
    ci_high: float | None
    n: int  #: respondents it is computed over
    group_by: str | None = None
    group: str | None = None
    gap: float | None = None  #: a subgroup's value minus the whole sample's
    #: what the metric gives on noise alone at this n: its mean when each simulated answer is drawn from the real
    #: answers' own distribution (accuracy: chance); None where the figure has none
    floor: float | None = None


Metric = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], "float | None"]

#: Simulated samples whose mean metric is a noise floor (:attr:`Figure.floor`).
FLOOR_DRAWS = 200

#: Called before each bootstrap resample; what it raises ends the scoring (how a time limit or a cancel stops one).
Checkpoint = Callable[[], None]


def no_checkpoint() -> None:
    """The default :data:`Checkpoint`: the scoring always goes on."""


def _checked(draws: np.ndarray, checkpoint: Checkpoint) -> Iterator[np.ndarray]:
    """Each resample of ``draws`` (a row), after ``checkpoint`` lets it go on."""
    for draw in draws:
        checkpoint()
        yield draw


def _metrics(answers: ItemAnswers) -> dict[str, Metric]:
    k = len(answers.labels)
    found: dict[str, Metric] = {
        "tvd": lambda r, s, w, t: tvd(distribution(r, w, k), distribution(s, w, k)),
        "jsd": lambda r, s, w, t: jsd(distribution(r, w, k), distribution(s, w, k)),
        "accuracy": lambda r, s, w, t: accuracy(r, s, w),
    }
    if answers.ordinal:
        found["wasserstein"] = lambda r, s, w, t: wasserstein(distribution(r, w, k), distribution(s, w, k))
        found["spearman"] = lambda r, s, w, t: spearman(r, s, w)
    if answers.ceiling is not None:
        ceiling = answers.ceiling
        found["item_normalized_accuracy"] = lambda r, s, w, t: accuracy(r, s, w) / ceiling
    elif answers.retest is not None:
        found["item_normalized_accuracy"] = _against_retest
    return found


def _against_retest(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray, retest: np.ndarray | None) -> float | None:
    assert retest is not None
    asked = retest != NONE
    if asked.sum() < 2:
        return None
    ceiling = accuracy(real[asked], retest[asked], weights[asked])
    return accuracy(real, simulated, weights) / ceiling if ceiling > 0 else None


def _floors(answers: ItemAnswers, real: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
    """Each metric's noise floor over these respondents: its mean over :data:`FLOOR_DRAWS` surveys in which every
    respondent's real and simulated answers are both drawn from the real answers' weighted distribution ``p`` (a
    perfect simulation of the population: only the sampling noise of ``n`` real and ``n`` simulated answers is left,
    as in the figure itself). Accuracy's is its chance, ``sum(p_k^2)``; Spearman's is 0 (answers drawn apart from
    the real ones have no correlation with them)."""
    k = len(answers.labels)
    shares = distribution(real, weights, k)
    floors = {"accuracy": float((shares**2).sum())}
    if answers.ceiling is not None:
        floors["item_normalized_accuracy"] = floors["accuracy"] / answers.ceiling
    drawn = rng.choice(k, size=(2, FLOOR_DRAWS, len(real)), p=shares)
    pairs = [(distribution(a, weights, k), distribution(b, weights, k)) for a, b in zip(*drawn, strict=True)]
    floors["tvd"] = float(np.mean([tvd(a, b) for a, b in pairs]))
    floors["jsd"] = float(np.mean([jsd(a, b) for a, b in pairs]))
    if answers.ordinal:
        floors["wasserstein"] = float(np.mean([wasserstein(a, b) for a, b in pairs]))
        floors["spearman"] = 0.0
    return floors


def _interval(values: Sequence[float | None], confidence: float) -> tuple[float | None, float | None]:
    kept = np.array([v for v in values if v is not None and np.isfinite(v)])
    if len(kept) < max(2, len(values) // 2):  # the figure rarely exists in a resample: no honest interval
        return None, None
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(kept, [tail, 100 - tail])
    return float(low), float(high)


def _distance_interval(value: float | None, resampled: Sequence[float | None], swapped: Sequence[float | None],
                       confidence: float) -> tuple[float | None, float | None]:
    """A distance's interval: the percentile interval shifted down by the bootstrap's estimate of the plug-in's bias
    (the resamples' mean less the value), its ends at 0 or above, and its lower end 0 when the value is within what
    swapping each respondent's real and simulated answers gives (``swapped``: a permutation test of no difference at
    ``1 - confidence``). A plug-in distance is biased upward and has no smooth bootstrap at 0; this covers the true
    distance, 0 included (``benchmarks/coverage.py``)."""
    low, high = _interval(resampled, confidence)
    if value is None or low is None or high is None:
        return low, high
    kept = [v for v in resampled if v is not None and np.isfinite(v)]
    bias = float(np.mean(kept)) - value
    low, high = max(low - bias, 0.0), max(high - bias, 0.0)
    null = [v for v in swapped if v is not None and np.isfinite(v)]
    if null and value <= float(np.percentile(null, confidence * 100)):
        low = 0.0
    return low, high


def _swapped(real: np.ndarray, simulated: np.ndarray, swaps: np.ndarray,
             checkpoint: Checkpoint) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``real`` and ``simulated`` with each respondent's two answers (rows) exchanged where ``swaps`` says, per row of
    ``swaps`` (after ``checkpoint`` lets it go on): what no difference between them would give as often as what was
    seen."""
    for swap in _checked(swaps, checkpoint):
        where = swap.reshape((-1,) + (1,) * (real.ndim - 1))
        yield np.where(where, simulated, real), np.where(where, real, simulated)


#: The figures whose intervals are a distance's (:func:`_distance_interval`): 0 means no difference.
DISTANCES = frozenset({"tvd", "jsd", "wasserstein"})


def _figures(answers: ItemAnswers, keep: np.ndarray, draws: np.ndarray, confidence: float, checkpoint: Checkpoint,
             floor_rng: np.random.Generator, group_by: str | None = None, group: str | None = None) -> list[Figure]:
    """Every metric of ``answers`` over the respondents ``keep`` selects, with its bootstrap interval and floor."""
    real, sim, w = answers.real[keep], answers.simulated[keep], answers.weights[keep]
    retest = answers.retest[keep] if answers.retest is not None else None
    n = len(real)
    floors = _floors(answers, real, w, floor_rng)
    rows = []
    for metric, compute in _metrics(answers).items():
        value = compute(real, sim, w, retest)
        resampled = [compute(real[d], sim[d], w[d], retest[d] if retest is not None else None)
                     for d in _checked(draws[:, :n] % n, checkpoint)]
        if metric in DISTANCES:
            swaps = floor_rng.random((len(draws), n)) < 0.5
            swapped = [compute(r, s, w, None) for r, s in _swapped(real, sim, swaps, checkpoint)]
            low, high = _distance_interval(value, resampled, swapped, confidence)
        else:
            low, high = _interval(resampled, confidence)
        rows.append(Figure(answers.item, metric, value, low, high, n, group_by, group, floor=floors.get(metric)))
    return rows


def _check(answers: ItemAnswers, scored: np.ndarray) -> None:
    if answers.unmatched and not scored.any():
        raise FidelityError(f"item {answers.item!r}: none of its simulated answers is one of its labels "
                            f"({', '.join(answers.labels)}): was it asked with other options?")
    if scored.sum() < 2:
        raise FidelityError(f"item {answers.item!r}: {int(scored.sum())} respondent(s) have both a real and a valid "
                            "simulated answer; at least 2 are needed to score it")


def score(items: Sequence[ItemAnswers], *, by: Sequence[str] = (), bootstrap: int = 200, seed: int = 0,
          confidence: float = 0.95, checkpoint: Checkpoint = no_checkpoint) -> list[Figure]:
    """The figures of every item, its subgroups by each persona field in ``by``, and across the ordinal items.

    ``checkpoint`` is called before each bootstrap resample; what it raises ends the scoring.

    Raises:
        FidelityError: an item cannot be scored (too few respondents, no shared options), or ``by`` names a
            field no respondent has.
    """
    rng = np.random.default_rng(seed)
    floor_rng = np.random.default_rng([seed, 0xF1004])
    rows: list[Figure] = []
    for answers in items:
        real_known = answers.real != NONE
        scored = real_known & (answers.simulated != NONE)
        _check(answers, scored)
        draws = rng.integers(0, 2**31, size=(bootstrap, int(scored.sum())))
        covered = float(answers.weights[scored].sum() / answers.weights[real_known].sum())
        rows.append(Figure(answers.item, "coverage", covered, None, None, int(real_known.sum())))
        whole = _figures(answers, scored, draws, confidence, checkpoint, floor_rng)
        rows.extend(whole)
        overall = {figure.metric: figure.value for figure in whole}
        for name in by:
            values = answers.groups.get(name)
            if values is None or all(v is None for v in values):
                raise FidelityError(f"no respondent has the persona field {name!r} to group by")
            for group in sorted({v for v in values[scored] if v is not None}, key=str):
                members = scored & (values == group)
                if members.sum() < 2:
                    continue
                for figure in _figures(answers, members, draws, confidence, checkpoint, floor_rng, name, str(group)):
                    base = overall.get(figure.metric)
                    gap = figure.value - base if figure.value is not None and base is not None else None
                    rows.append(dataclasses.replace(figure, gap=gap))
    rows.extend(_across(items, rng, bootstrap, confidence, checkpoint, floor_rng))
    rows.extend(_park(items, rng, bootstrap, confidence, checkpoint))
    return rows


def _across(items: Sequence[ItemAnswers], rng: np.random.Generator, bootstrap: int, confidence: float,
            checkpoint: Checkpoint, floor_rng: np.random.Generator) -> list[Figure]:
    """``correlation_rmse`` over the respondents (by agent) who answered every ordinal item, really and simulated."""
    ordinal = [a for a in items if a.ordinal]
    if len(ordinal) < 2:
        return []
    common = set(ordinal[0].agents.tolist())
    for answers in ordinal[1:]:
        common &= set(answers.agents.tolist())
    agents = np.array(sorted(common))
    real, sim, weights = [], [], None
    for answers in ordinal:
        order = {int(a): i for i, a in enumerate(answers.agents)}
        index = np.array([order[int(a)] for a in agents], dtype=int)
        real.append(answers.real[index])
        sim.append(answers.simulated[index])
        weights = answers.weights[index]
    real_m, sim_m = np.column_stack(real), np.column_stack(sim)
    both = (real_m != NONE).all(axis=1) & (sim_m != NONE).all(axis=1)
    if both.sum() < 3 or weights is None:
        return []
    real_m, sim_m, w = real_m[both], sim_m[both], weights[both]
    n = len(w)
    errors = correlation_errors(real_m, sim_m, w)
    value = float(np.sqrt(np.mean(errors**2))) if len(errors) else None
    draws = rng.integers(0, n, size=(bootstrap, n))
    resampled = [correlation_rmse(real_m[d], sim_m[d], w[d]) for d in _checked(draws, checkpoint)]
    swaps = floor_rng.random((bootstrap, n)) < 0.5
    swapped = [correlation_rmse(r, s, w) for r, s in _swapped(real_m, sim_m, swaps, checkpoint)]
    low, high = _distance_interval(value, resampled, swapped, confidence)
    # The floor: each respondent's real and simulated answers both a real respondent's, drawn by weight (the joint
    # distribution kept), as a perfect simulation of the population would give.
    picks = floor_rng.choice(n, size=(2, FLOOR_DRAWS, n), p=w / w.sum())
    floor = np.mean([correlation_rmse(real_m[a], real_m[b], w) or 0.0 for a, b in zip(*picks, strict=True)])
    return [Figure("*", "correlation_rmse", value, low, high, n, floor=float(floor)),
            Figure("*", "correlation_pairs", float(len(errors)), None, None, n)]


def _park(items: Sequence[ItemAnswers], rng: np.random.Generator, bootstrap: int, confidence: float,
          checkpoint: Checkpoint) -> list[Figure]:
    """Park et al.'s ``normalized_accuracy`` over the items with a retest, per respondent (by agent), then averaged.

    A respondent counts on the items they have a real, a valid simulated and a retest answer to; ``n`` is the
    respondents the average is over (those whose retest agrees with them on at least one such item).
    """
    retested = [a for a in items if a.retest is not None]
    if not retested:
        return []
    agents = np.array(sorted(set().union(*(a.agents.tolist() for a in retested))), dtype=np.int64)
    row = {int(agent): i for i, agent in enumerate(agents)}
    shape = (len(agents), len(retested))
    real, sim, again = np.full(shape, NONE), np.full(shape, NONE), np.full(shape, NONE)
    weights = np.zeros(len(agents))
    for column, answers in enumerate(retested):
        assert answers.retest is not None
        index = np.array([row[int(a)] for a in answers.agents], dtype=int)
        real[index, column], sim[index, column], again[index, column] = answers.real, answers.simulated, answers.retest
        weights[index] = answers.weights
    asked = (real != NONE) & (sim != NONE) & (again != NONE)
    value = normalized_accuracy(real, sim, again, asked, weights)
    if value is None:  # nobody's retest agrees with them on an item they were scored on: the figure does not exist
        return [Figure("*", "normalized_accuracy", None, None, None, 0)]
    counted = ((real == again) & asked).any(axis=1) & (weights > 0)
    n = len(agents)
    draws = rng.integers(0, n, size=(bootstrap, n))
    low, high = _interval([normalized_accuracy(real[d], sim[d], again[d], asked[d], weights[d])
                           for d in _checked(draws, checkpoint)], confidence)
    return [Figure("*", "normalized_accuracy", value, low, high, int(counted.sum()))]


def compare_variant(base: ItemAnswers, variant: ItemAnswers, name: str, threshold: float, *, bootstrap: int = 200,
                    seed: int = 0, confidence: float = 0.95, checkpoint: Checkpoint = no_checkpoint) -> list[Figure]:
    """How far the answers to a variant of an item (a paraphrase, shuffled options) move from the original's, over
    the respondents with a valid answer to both: ``variant_tvd`` between the two simulated distributions,
    ``variant_accuracy`` against the real answers (its ``gap`` to the original's), and ``flagged`` (1 when the
    variant's true TVD is past ``threshold``: its interval's lower end passes it; the interval is corrected for the
    plug-in's bias and is 0 at its lower end when the variant moved no more than swapping the two answers would,
    so noise does not flag; the floor, the TVD two samples of the original's answers have at this n, is shown
    beside it). Grouped under ``variant`` = ``name``; none when fewer than 2 answered both."""
    both = (base.simulated != NONE) & (variant.simulated != NONE)
    real_known = both & (base.real != NONE)
    if both.sum() < 2:
        return []
    k = len(base.labels)
    original, varied, w = base.simulated[both], variant.simulated[both], base.weights[both]
    n = len(w)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(bootstrap, n))
    moved = tvd(distribution(original, w, k), distribution(varied, w, k))
    swap_rng = np.random.default_rng([seed, 0x5BA9])
    swapped = [tvd(distribution(a, w, k), distribution(b, w, k))
               for a, b in _swapped(original, varied, swap_rng.random((bootstrap, n)) < 0.5, checkpoint)]
    low, high = _distance_interval(moved, [tvd(distribution(original[d], w[d], k), distribution(varied[d], w[d], k))
                                           for d in _checked(draws, checkpoint)], swapped, confidence)
    # The floor: both answer sets drawn from the original's distribution, as if the wording changed nothing.
    shares = distribution(original, w, k)
    pairs = np.random.default_rng([seed, 0xF1004]).choice(k, size=(2, FLOOR_DRAWS, n), p=shares)
    floor = float(np.mean([tvd(distribution(a, w, k), distribution(b, w, k)) for a, b in zip(*pairs, strict=True)]))
    flagged = low is not None and low > threshold  # the interval covers the true distance: its floor is out of it
    rows = [Figure(base.item, "variant_tvd", moved, low, high, n, "variant", name, floor=floor),
            Figure(base.item, "flagged", float(flagged), None, None, n, "variant", name)]
    if real_known.sum() >= 2:
        real, r_w = base.real[real_known], base.weights[real_known]
        of_variant, of_base = variant.simulated[real_known], base.simulated[real_known]
        value = accuracy(real, of_variant, r_w)
        m = len(real)
        picks = rng.integers(0, m, size=(bootstrap, m))
        a_low, a_high = _interval([accuracy(real[d], of_variant[d], r_w[d]) for d in _checked(picks, checkpoint)],
                                  confidence)
        rows.append(Figure(base.item, "variant_accuracy", value, a_low, a_high, m, "variant", name,
                           gap=value - accuracy(real, of_base, r_w)))
    return rows
