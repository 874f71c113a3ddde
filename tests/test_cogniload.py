"""CogniLoad consistency check (docs/metrics/decomposition.md#cogniload-consistency-check):
published summaries through the same decompose path.

Published rates are rounded percents (±0.5 pp), VŌ and κ have two decimals, E[T] is rounded to
a token; the bounds below are those roundings carried through the formulas.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics.decomposition import BEST_E0, decompose
from legival_core.published.cogniload_consistency import (
    cogniload_consistency,
    common_workload_minimax,
    instances_from_summary,
)
from legival_core.published.published import cogniload_efficiency

HALF_PP = 0.005  # half a percentage point
N = 1000


@pytest.fixture(scope="module")
def published() -> pd.DataFrame:
    return cogniload_efficiency()


@pytest.fixture(scope="module")
def strict() -> pd.DataFrame:
    return cogniload_consistency(n_instances=N, accuracy_from="published")


@pytest.fixture(scope="module")
def informed() -> pd.DataFrame:
    return cogniload_consistency(n_instances=N, accuracy_from="e0")


def _log_rounding_bound(rate_model: np.ndarray, rate_ref: float) -> np.ndarray:
    # |log(a'/b') − log(a/b)| ≤ −log(1 − h/a) − log(1 − h/b) when a', b' are within h of a, b
    return -np.log(1 - HALF_PP / rate_model) - np.log(1 - HALF_PP / rate_ref)


def test_builder_by_hand():
    summary = pd.DataFrame(
        {
            "model": ["m"],
            "accuracy": [0.5],
            "r_ctx": [0.8],
            "r_logic": [0.625],
            "mean_tokens": [1000.0],
            "vo": [4.0],
            "kappa": [0.5],
        }
    )
    table = instances_from_summary(summary, n_instances=20)
    # counts: 0.8·20 = 16 completed, 0.5·20 = 10 correct, 10/16 = 0.625
    assert int((~table["truncated"]).sum()) == 16 and int(table["correct"].sum()) == 10
    assert not (table["correct"] & table["truncated"]).any()
    # W̄ = E[T]/(VŌ·κ) = 1000/(4·0.5) = 500; x = 0.2: light W = 100, heavy W = 1.8·500 = 900
    assert sorted(set(table["workload"])) == pytest.approx([100.0, 900.0])
    # d = (2/κ − 1/x − 1/(2−x)) / (1/x − 1/(2−x)) = (4 − 5 − 0.5556)/(5 − 0.5556) = −0.35
    # -> light T = 1000·0.65 = 650, heavy T = 1000·1.35 = 1350
    light = table["workload"] < 500
    assert table.loc[light, "tokens"].unique() == pytest.approx([650.0])
    assert table.loc[~light, "tokens"].unique() == pytest.approx([1350.0])
    row = decompose(table, n_boot=0).iloc[0]
    # VŌ = (650/100 + 1350/900)/2 = (6.5 + 1.5)/2 = 4; κ = 1000/(500·4) = 0.5
    assert row["vo"] == pytest.approx(4.0) and row["kappa"] == pytest.approx(0.5)
    assert row["e0"] == pytest.approx(1000 * 0.5 / 1000)


def test_builder_rejects_what_it_cannot_build():
    base = {"model": ["m"], "accuracy": [0.5], "r_ctx": [0.8], "r_logic": [0.625]}
    with pytest.raises(ValueError, match=r"row 0 \(model='m'\), field 'kappa'"):
        instances_from_summary(
            pd.DataFrame({**base, "mean_tokens": [1000.0], "vo": [4.0], "kappa": [1.9]}),
            n_instances=20,
        )
    with pytest.raises(ValueError, match="inconsistent"):
        instances_from_summary(
            pd.DataFrame({**base, "r_logic": [0.9], "mean_tokens": [1000.0]}), n_instances=20
        )
    with pytest.raises(ValueError, match="even"):
        instances_from_summary(pd.DataFrame({**base, "mean_tokens": [1.0]}), n_instances=21)
    with pytest.raises(ValueError, match="missing column"):
        instances_from_summary(pd.DataFrame(base), n_instances=20)


def test_published_rates_are_mutually_consistent(published):
    # accuracy should equal r_ctx·r_logic up to the rounding of all three percents
    acc = published["accuracy_pct"] / 100
    product = published["r_ctx_pct"] / 100 * published["r_logic_pct"] / 100
    assert ((acc - product).abs() <= 3 * HALF_PP).all()


def test_built_tables_reproduce_every_published_rate(published, strict):
    assert len(strict) == 25
    assert (
        strict["accuracy_built"] - published["accuracy_pct"] / 100
    ).abs().max() <= HALF_PP + 1e-12
    assert (strict["r_ctx_built"] - published["r_ctx_pct"] / 100).abs().max() <= HALF_PP + 1e-12
    assert (strict["r_logic_built"] - published["r_logic_pct"] / 100).abs().max() <= HALF_PP + 1e-12
    assert np.allclose(strict["mean_tokens_built"], published["mean_tokens"], rtol=1e-12)
    assert np.allclose(strict["vo_built"], published["vo_nat"], rtol=1e-12)
    # per-model workload: κ comes out exactly
    assert np.allclose(strict["kappa_built"], published["kappa_nat"], rtol=1e-12)


def test_e0_from_rounded_accuracy(published, strict):
    # 100·E0 = 10⁵·accuracy/E[T]: a ±0.5 pp accuracy moves it by up to 500/E[T]
    t = published["mean_tokens"].to_numpy(float)
    bound = 1e5 * (HALF_PP + 1 / N) / t
    assert (strict["e0_x100_diff"].abs() <= bound).all()
    # All but one model land within ±0.1. GLM-Z1-32B: published E0 11.94 and E[T] 3,980 imply
    # accuracy 11.94·3980/10⁵ = 47.52 %, printed as 48 %; 10⁵·0.48/3980 = 12.06 (+0.12).
    off = strict.loc[strict["e0_x100_diff"].abs() > 0.1, "model"].tolist()
    assert off == ["GLM-Z1-32B"]
    assert round(11.94 * 3980 / 1e5 * 100) == 48


def test_e0_within_a_tenth_when_accuracy_is_unrounded(informed):
    # accuracy aimed at 100·E0·E[T]/10⁵ (still within every rounded percent): all 25 within
    # ±0.1; what remains is the 1/1000 granularity of 1,000 instances
    assert (informed["e0_x100_diff"].abs() <= 0.1).all()
    assert informed["e0_x100_diff"].abs().max() < 0.02


@pytest.mark.parametrize("frame", ["strict", "informed"])
def test_dlog_terms_against_o3_match_published_columns(frame, published, request):
    result = request.getfixturevalue(frame)
    o3 = published.set_index("model").loc["o3"]
    for column, built in (("r_ctx_pct", "dlog_r_ctx"), ("r_logic_pct", "dlog_r_logic")):
        rates = published[column].to_numpy(float) / 100
        bound = _log_rounding_bound(rates, float(o3[column]) / 100)
        diff = (result[f"{built}_built"] - result[f"{built}_published"]).abs()
        assert (diff <= bound + 1e-12).all(), column
    # VŌ is built exactly: Δlog VŌ = log(VŌ/VŌ_o3) to machine precision
    assert np.allclose(result["dlog_vo_built"], result["dlog_vo_published"], atol=1e-12)
    o3_row = result.set_index("model").loc["o3"]
    assert o3_row["dlog_r_logic_built"] == 0 and o3_row["dlog_vo_built"] == 0


def test_identity_holds_on_the_rebuilt_table(published):
    summary = pd.DataFrame(
        {
            "model": published["model"],
            "accuracy": published["accuracy_pct"] / 100,
            "r_ctx": published["r_ctx_pct"] / 100,
            "r_logic": published["r_logic_pct"] / 100,
            "mean_tokens": published["mean_tokens"].astype(float),
            "vo": published["vo_nat"],
            "kappa": published["kappa_nat"],
        }
    )
    table = instances_from_summary(summary, n_instances=N, benchmark="cogniload")
    result = decompose(table, reference=BEST_E0, n_boot=0)
    # o3 has the highest E0 of the 25, published and rebuilt
    assert set(result["reference"]) == {"o3"}
    rhs = (
        result["dlog_r_ctx"]
        + result["dlog_r_logic"]
        - result["dlog_w"]
        - result["dlog_vo"]
        - result["dlog_kappa"]
    )
    assert (result["dlog_e0"] - rhs).abs().max() < 1e-9


def test_one_common_workload_fits_kappa_to_about_rounding(published):
    w_bar = common_workload_minimax(published)
    result = cogniload_consistency(n_instances=N, workload="common")
    # one native workload for all models: on the same instances Δlog E[W] is exactly 0
    assert (result["dlog_w_built"] == 0).all()
    assert result.attrs["mean_workload"] == pytest.approx(w_bar)
    # κ = E[T]/(W̄·VŌ) then misses the published two-decimal κ by at most 0.0061 — a little
    # more than the 0.005 rounding: the implied E[W] = E[T]/(VŌ·κ) spreads from 482 to 500
    implied = published["mean_tokens"] / (published["vo_nat"] * published["kappa_nat"])
    assert 480 < implied.min() < 485 and 498 < implied.max() < 501
    worst = (result["kappa_built"] - result["kappa_published"]).abs().max()
    assert 0.005 < worst < 0.0065
    assert math.isclose(w_bar, 492.42, abs_tol=0.05)
