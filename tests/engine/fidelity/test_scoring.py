"""Scoring items: perfect answers score perfectly, known noise scores as expected within its interval, subgroups carry
their gap, and an item that cannot be scored is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import FidelityError
from engine.fidelity.scoring import NONE, ItemAnswers, score


def noisy(real: np.ndarray, k: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Each answer kept with probability 1 - noise, else another option drawn evenly (the rehearsal's rule)."""
    flip = rng.random(len(real)) < noise
    other = (real + rng.integers(1, k, len(real))) % k
    return np.where(flip, other, real)


def item(real, simulated, *, k=5, ordinal=True, weights=None, **changes) -> ItemAnswers:
    n = len(real)
    return ItemAnswers(item=changes.pop("name", "rate"), labels=tuple(f"l{i}" for i in range(k)), ordinal=ordinal,
                       agents=np.arange(n), real=np.asarray(real), simulated=np.asarray(simulated),
                       weights=np.ones(n) if weights is None else np.asarray(weights, dtype=float), **changes)


def by_metric(figures, **where):
    return {f.metric: f for f in figures if all(getattr(f, key) == value for key, value in where.items())}


def test_the_same_answers_score_perfectly():
    real = np.random.default_rng(1).integers(0, 5, 500)
    found = by_metric(score([item(real, real)], bootstrap=50), group_by=None, item="rate")
    assert found["accuracy"].value == 1.0 and found["spearman"].value == pytest.approx(1.0)
    assert found["tvd"].value == found["jsd"].value == found["wasserstein"].value == 0.0
    assert found["coverage"].value == 1.0 and found["accuracy"].ci_low == 1.0


@pytest.mark.parametrize("noise", [0.1, 0.3])
def test_known_noise_gives_the_expected_accuracy_and_distance_within_the_interval(noise):
    rng = np.random.default_rng(7)
    k, n = 5, 3000
    shares = np.array([0.05, 0.1, 0.2, 0.4, 0.25])
    real = rng.choice(k, size=n, p=shares)
    found = by_metric(score([item(real, noisy(real, k, noise, rng), k=k)], bootstrap=300, seed=2), group_by=None)
    # Expected: accuracy 1 - p; the simulated distribution q_j = (1 - p) s_j + p (1 - s_j) / (k - 1)
    expected_q = (1 - noise) * shares + noise * (1 - shares) / (k - 1)
    expected_tvd = 0.5 * np.abs(expected_q - shares).sum()
    assert found["accuracy"].ci_low <= 1 - noise <= found["accuracy"].ci_high
    assert found["tvd"].ci_low <= expected_tvd <= found["tvd"].ci_high


def test_weights_count_and_missing_answers_lower_coverage_not_accuracy():
    real = np.array([0, 1, 2, 3, 4, 0])
    sim = np.array([0, 1, 2, 3, 0, NONE])  # the last respondent's simulated answer failed
    found = by_metric(score([item(real, sim, weights=[1, 1, 1, 1, 4, 2])], bootstrap=20), group_by=None)
    assert found["coverage"].value == pytest.approx(8 / 10) and found["coverage"].n == 6
    assert found["accuracy"].value == pytest.approx(4 / 8) and found["accuracy"].n == 5


def test_subgroups_report_their_figures_and_gap_to_the_whole():
    real = np.array([0, 1, 2, 0, 1, 2])
    sim = np.array([0, 1, 2, 2, 2, 2])
    groups = {"party": np.array(["a", "a", "a", "b", "b", "b"], dtype=object)}
    figures = score([item(real, sim, k=3, groups=groups)], by=["party"], bootstrap=20)
    whole, a, b = (by_metric(figures, group=g)["accuracy"] for g in (None, "a", "b"))
    assert (whole.value, a.value, b.value) == (pytest.approx(4 / 6), 1.0, pytest.approx(1 / 3))
    assert a.gap == pytest.approx(1 - 4 / 6) and b.gap == pytest.approx(1 / 3 - 4 / 6) and a.group_by == "party"
    with pytest.raises(FidelityError, match="persona field 'age'"):
        score([item(real, sim, k=3, groups=groups)], by=["age"], bootstrap=5)


def test_normalized_accuracy_divides_by_the_given_or_the_retest_ceiling():
    real = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    sim = np.array([0, 1, 2, 0, 0, 0, 0, 0])  # accuracy 5/8
    given = by_metric(score([item(real, sim, k=3, ceiling=0.8)], bootstrap=10), group_by=None)
    assert given["normalized_accuracy"].value == pytest.approx((5 / 8) / 0.8)
    retest = np.array([0, 1, 2, 0, 1, 2, 1, 0])  # people agree with themselves 6/8 of the time
    measured = by_metric(score([item(real, sim, k=3, retest=retest)], bootstrap=10), group_by=None)
    assert measured["normalized_accuracy"].value == pytest.approx((5 / 8) / (6 / 8))


def test_across_items_the_correlation_matrices_are_compared():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 5, 400)
    b = np.clip(a + rng.integers(-1, 2, 400), 0, 4)
    same = score([item(a, a, name="a"), item(b, b, name="b")], bootstrap=20)
    assert by_metric(same, item="*")["correlation_rmse"].value == pytest.approx(0.0, abs=1e-12)
    shuffled = score([item(a, a, name="a"), item(b, rng.permutation(b), name="b")], bootstrap=20)
    assert by_metric(shuffled, item="*")["correlation_rmse"].value > 0.5


def test_an_item_that_cannot_be_scored_is_named():
    with pytest.raises(FidelityError, match=r"item 'rate': 1 respondent\(s\) have both"):
        score([item(np.array([0, 1, 2]), np.array([0, NONE, NONE]))])
    with pytest.raises(FidelityError, match="item 'rate': none of its simulated answers is one of its labels"):
        score([item(np.array([0, 1, 2]), np.array([NONE, NONE, NONE]), unmatched=3)])



class Stopped(Exception):
    pass


def test_a_checkpoint_passes_every_resample_and_what_it_raises_ends_the_scoring():
    real = np.random.default_rng(2).integers(0, 5, 60)
    rate = item(real, real, groups={"g": np.array(["x", "y"] * 30, dtype=object)})
    calls = 0

    def count() -> None:
        nonlocal calls
        calls += 1

    assert score([rate], by=["g"], bootstrap=7, checkpoint=count) == score([rate], by=["g"], bootstrap=7)
    assert calls == 5 * 7 * 3  # tvd, jsd, accuracy, wasserstein, spearman: 7 resamples each, over all and g's 2 groups

    def stop_at_the_tenth() -> None:
        nonlocal calls
        calls += 1
        if calls == 10:
            raise Stopped

    calls = 0
    with pytest.raises(Stopped):
        score([rate], by=["g"], bootstrap=2000, checkpoint=stop_at_the_tenth)
    assert calls == 10  # nothing ran past the stop
