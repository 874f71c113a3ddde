"""Kaiser et al. decomposition (docs/metrics/decomposition.md): hand-worked values, edge cases and
properties."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.metrics.decomposition import (
    BEST_E0,
    DECOMPOSITION_COLUMNS,
    FAILURE_MODE_RULES,
    decompose,
    failure_mode,
    failure_modes,
    normalize_instances,
)
from legival_core.metrics.efficiency import compression_ratio
from legival_core.metrics.trace_audits import (
    oracle_early_stop,
    prefix_checks,
    prompt_copy_share,
    repeated_ngram_share,
    tokens_by_outcome,
    truncation_loop_audit,
)

IDENTITY_TOL = 1e-9


def _table(model: str, correct, truncated, tokens, workload=None, bench="b", ids=None):
    n = len(correct)
    data = {
        "model": [model] * n,
        "benchmark": [bench] * n,
        "instance_id": ids if ids is not None else [f"i{k}" for k in range(1, n + 1)],
        "correct": correct,
        "tokens": tokens,
        "truncated": truncated,
    }
    if workload is not None:
        data["workload"] = workload
    return pd.DataFrame(data)


# Model A: S = 1 1 0 0, C = 0 0 0 1 (instance 4 truncated), T = 100 300 200 400, W = 10 20 10 20.
MODEL_A = _table("A", [1, 1, 0, 0], [0, 0, 0, 1], [100, 300, 200, 400], [10, 20, 10, 20])
# Reference R on the same instances: S = 1 1 1 0, nothing truncated, T = 50 100 150 100.
MODEL_R = _table("R", [1, 1, 1, 0], [0, 0, 0, 0], [50, 100, 150, 100], [10, 20, 10, 20])


def _row(result: pd.DataFrame, model: str, bench: str = "b") -> pd.Series:
    return result.set_index(["model", "benchmark"]).loc[(model, bench)]


def test_four_instance_example_by_hand():
    row = _row(decompose(MODEL_A, n_boot=0), "A")
    # accuracy = 2/4; E[T] = (100+300+200+400)/4 = 250; E0 = 1000·0.5/250 = 2
    assert row["accuracy"] == 0.5
    assert row["mean_tokens"] == 250
    assert row["e0"] == pytest.approx(2.0)
    # r_ctx = 3 completed / 4; r_logic = 2 correct / 3 completed
    assert row["r_ctx"] == 0.75
    assert row["r_logic"] == pytest.approx(2 / 3)
    # E0 = 1000·r_ctx·r_logic/E[T] = 1000·0.75·(2/3)/250 = 2
    assert 1000 * row["r_ctx"] * row["r_logic"] / row["mean_tokens"] == pytest.approx(row["e0"])
    # E[W] = 15; VO = 10, 15, 20, 20 -> VŌ = 65/4 = 16.25; κ = 250/(15·16.25) = 40/39
    assert row["mean_workload"] == 15
    assert row["vo"] == pytest.approx(16.25)
    assert row["kappa"] == pytest.approx(40 / 39)
    # E[T] = E[W]·VŌ·κ exactly
    assert row["mean_workload"] * row["vo"] * row["kappa"] == pytest.approx(250, rel=1e-12)
    # tokens when correct: (100+300)/2; when incorrect: (200+400)/2
    assert row["mean_tokens_correct"] == 200
    assert row["mean_tokens_incorrect"] == 300
    assert row["layer"] == "workload"
    assert row["n"] == 4


def test_delta_log_identity_against_reference_by_hand():
    result = decompose(pd.concat([MODEL_A, MODEL_R]), reference="R", n_boot=0)
    a, r = _row(result, "A"), _row(result, "R")
    # R: acc 0.75, E[T] = 100, E0 = 7.5, r_ctx = 1, r_logic = 0.75,
    #    VO = 5, 5, 15, 5 -> VŌ = 7.5, κ = 100/(15·7.5) = 8/9
    assert r["e0"] == pytest.approx(7.5)
    assert r["vo"] == pytest.approx(7.5)
    assert r["kappa"] == pytest.approx(8 / 9)
    # Δlog E0 = log(2/7.5) = log(4/15); Δlog r_ctx = log(3/4); Δlog r_logic = log((2/3)/(3/4))
    # = log(8/9); Δlog W = 0; Δlog VŌ = log(16.25/7.5) = log(13/6); Δlog κ = log((40/39)/(8/9))
    # = log(15/13). Check: 3/4 · 8/9 · 6/13 · 13/15 = 4/15.
    assert a["dlog_e0"] == pytest.approx(math.log(4 / 15))
    assert a["dlog_r_ctx"] == pytest.approx(math.log(3 / 4))
    assert a["dlog_r_logic"] == pytest.approx(math.log(8 / 9))
    assert a["dlog_w"] == 0
    assert a["dlog_vo"] == pytest.approx(math.log(13 / 6))
    assert a["dlog_kappa"] == pytest.approx(math.log(15 / 13))
    assert a["dlog_tokens"] == pytest.approx(math.log(2.5))
    rhs = a["dlog_r_ctx"] + a["dlog_r_logic"] - a["dlog_w"] - a["dlog_vo"] - a["dlog_kappa"]
    assert abs(a["dlog_e0"] - rhs) < IDENTITY_TOL
    assert a["reference"] == "R" and a["n_paired"] == 4 and a["dlog_undefined"] == ""
    # the reference against itself: every dlog is exactly 0
    assert all(
        r[c] == 0
        for c in DECOMPOSITION_COLUMNS
        if c.startswith("dlog_")
        and "_lo" not in c
        and "_hi" not in c
        and c not in ("dlog_undefined",)
        and np.isfinite(r[c])
    )


def test_reference_pairs_only_shared_instances():
    # R answered one extra instance (i5) that A did not: the dlog terms use i1..i4 only.
    extra = _table("R", [0], [1], [1000], [30], ids=["i5"])
    result = decompose(pd.concat([MODEL_A, MODEL_R, extra]), reference="R", n_boot=0)
    a, r = _row(result, "A"), _row(result, "R")
    assert r["n"] == 5 and a["n_paired"] == 4
    # on all 5, R's E0 = 1000·(3/5)/(1400/5) = 2.142857; on the shared 4 it is 7.5 (as above)
    assert r["e0"] == pytest.approx(1000 * 0.6 / 280)
    assert a["dlog_e0"] == pytest.approx(math.log(2 / 7.5))


def test_no_workload_gives_outcome_layer_and_says_so():
    table = MODEL_A.drop(columns="workload")
    result = decompose(table, n_boot=0)
    row = _row(result, "A")
    assert row["layer"] == "outcome"
    assert row["e0"] == pytest.approx(2.0) and row["r_logic"] == pytest.approx(2 / 3)
    assert np.isnan(row["vo"]) and np.isnan(row["kappa"]) and np.isnan(row["mean_workload"])
    assert "Outcome layer only" in result.attrs["note"]
    assert list(result.columns) == list(DECOMPOSITION_COLUMNS)


def test_outcome_layer_identity_without_workload():
    both = pd.concat([MODEL_A, MODEL_R]).drop(columns="workload")
    a = _row(decompose(both, reference="R", n_boot=0), "A")
    # dlog_e0 = dlog_r_ctx + dlog_r_logic − dlog_tokens: log(3/4)+log(8/9)−log(2.5) = log(4/15)
    assert abs(a["dlog_e0"] - (a["dlog_r_ctx"] + a["dlog_r_logic"] - a["dlog_tokens"])) < 1e-12
    # VŌ is NaN because the layer is absent, which is not an undefined term
    assert np.isnan(a["dlog_vo"]) and a["dlog_undefined"] == ""


def test_mixed_layers_per_benchmark():
    other = MODEL_A.drop(columns="workload").assign(benchmark="c")
    result = decompose(pd.concat([MODEL_A, other]), n_boot=0)
    assert _row(result, "A", "b")["layer"] == "workload"
    assert _row(result, "A", "c")["layer"] == "outcome"
    assert "outcome layer only for A/c" in result.attrs["note"]


def test_zero_terms_are_reported_as_infinities_and_listed():
    # Z completes everything but never answers correctly: r_logic = 0 -> Δlog = −inf.
    zero = _table("Z", [0, 0, 0, 0], [0, 0, 0, 0], [10, 20, 30, 40], [10, 20, 10, 20])
    # X truncates everything: r_ctx = 0 (Δlog −inf) and r_logic undefined (NaN).
    cut = _table("X", [0, 0, 0, 0], [1, 1, 1, 1], [10, 20, 30, 40], [10, 20, 10, 20])
    result = decompose(pd.concat([MODEL_R, zero, cut]), reference="R", n_boot=0)
    z, x = _row(result, "Z"), _row(result, "X")
    assert z["e0"] == 0 and z["r_logic"] == 0
    assert z["dlog_r_logic"] == -np.inf and z["dlog_e0"] == -np.inf
    assert set(z["dlog_undefined"].split(",")) == {"e0", "r_logic"}
    assert np.isnan(z["mean_tokens_correct"])
    assert x["r_ctx"] == 0 and np.isnan(x["r_logic"])
    assert x["dlog_r_ctx"] == -np.inf and np.isnan(x["dlog_r_logic"])
    assert failure_mode(z) == "logic-limited"
    assert failure_mode(x) == "context-limited"


def test_zero_tokens_make_e0_and_kappa_undefined():
    silent = _table("S", [0, 0], [0, 0], [0, 0], [1, 2])
    row = _row(decompose(silent, n_boot=0), "S")
    # E[T] = 0: E0 = 1000·0/0 undefined; VŌ = 0 so κ = 0/(E[W]·0) undefined
    assert np.isnan(row["e0"]) and row["vo"] == 0 and np.isnan(row["kappa"])


def test_bootstrap_intervals_are_seeded_and_group_independent():
    both = pd.concat([MODEL_A, MODEL_R])
    first = decompose(both, reference="R", n_boot=200, seed=3)
    again = decompose(both, reference="R", n_boot=200, seed=3)
    pd.testing.assert_frame_equal(first, again)
    # A's own-term intervals do not depend on which other models are in the table
    alone = decompose(MODEL_A, n_boot=200, seed=3)
    for col in ("e0_lo", "e0_hi", "vo_lo", "vo_hi"):
        assert _row(alone, "A")[col] == _row(first, "A")[col]
    a = _row(first, "A")
    # resampling 4 instances: accuracy can only take values k/4
    assert a["accuracy_lo"] * 4 == round(a["accuracy_lo"] * 4)
    assert a["accuracy_lo"] <= a["accuracy"] <= a["accuracy_hi"]
    assert a["vo_lo"] <= a["vo"] <= a["vo_hi"]
    # the reference against itself: every resample gives Δlog 0
    r = _row(first, "R")
    assert r["dlog_e0_lo"] == 0 and r["dlog_e0_hi"] == 0


def test_bootstrap_zero_variance_collapses_and_n_boot_zero_gives_nan():
    perfect = _table("P", [1] * 5, [0] * 5, [100] * 5, [10] * 5)
    row = _row(decompose(perfect, n_boot=100), "P")
    # every resample: accuracy 1, E[T] 100, E0 10, VŌ 10, κ 1
    assert (row["accuracy_lo"], row["accuracy_hi"]) == (1.0, 1.0)
    assert row["e0_lo"] == pytest.approx(10) and row["e0_hi"] == pytest.approx(10)
    assert row["kappa_lo"] == pytest.approx(1) and row["kappa_hi"] == pytest.approx(1)
    # no incorrect outputs in any resample: the interval is undefined
    assert np.isnan(row["mean_tokens_incorrect_lo"])
    none = _row(decompose(perfect, n_boot=0), "P")
    assert np.isnan(none["e0_lo"]) and np.isnan(none["e0_hi"])


def test_bootstrap_interval_width_shrinks_with_more_instances():
    rng = np.random.default_rng(0)

    def sample(n: int) -> pd.DataFrame:
        correct = rng.random(n) < 0.6
        return _table("M", correct, [False] * n, rng.integers(100, 1000, n), ids=list(range(n)))

    small = _row(decompose(sample(30), n_boot=300), "M")
    large = _row(decompose(sample(3000), n_boot=300), "M")
    assert large["e0_hi"] - large["e0_lo"] < (small["e0_hi"] - small["e0_lo"]) / 4


def test_best_e0_reference_is_chosen_per_benchmark():
    both = pd.concat([MODEL_A, MODEL_R])
    result = decompose(both, reference=BEST_E0, n_boot=0)
    # R has E0 7.5 > A's 2: R is the reference
    assert set(result["reference"]) == {"R"}
    assert "best-E0" in result.attrs["note"]


def test_trace_layer_terms_by_hand():
    looping = "wait " * 400  # compresses to a tiny fraction
    short = "ok"  # 2 bytes -> zlib gives more bytes: σ capped at 1
    table = MODEL_A.assign(trace=[short, looping, short, short])
    sigma_loop = len(zlib.compress(looping.encode(), 9)) / len(looping.encode())
    row = _row(decompose(table, n_boot=0), "A")
    sig = np.array([1.0, sigma_loop, 1.0, 1.0])
    t = np.array([100, 300, 200, 400.0])
    w = np.array([10, 20, 10, 20.0])
    assert row["has_trace"]
    assert row["q_trace"] == pytest.approx(sig.mean())
    # E[σT] = (100 + 300σ + 200 + 400)/4; signal share = E[σT]/250
    assert row["signal_share"] == pytest.approx((700 + 300 * sigma_loop) / 4 / 250)
    # VŌ_sig = mean(σT/W) = (10 + 15σ + 20 + 20)/4; κ_sig = E[σT]/(E[W]·VŌ_sig)
    assert row["vo_sig"] == pytest.approx((50 + 15 * sigma_loop) / 4)
    assert row["kappa_sig"] == pytest.approx((sig * t).mean() / (15 * (sig * t / w).mean()))


def test_trace_identity_and_failure_mode_shares_add_up():
    rng = np.random.default_rng(1)
    words = ["so", "we", "get", "x", "=", "3", "wait", "check", "again"]

    def traces(n: int, loop: bool) -> list[str]:
        return [
            " ".join(rng.choice(words, 5)) * (30 if loop else 1) + str(rng.integers(1e6))
            for _ in range(n)
        ]

    a = MODEL_A.assign(trace=traces(4, True))
    r = MODEL_R.assign(trace=traces(4, False))
    row = _row(decompose(pd.concat([a, r]), reference="R", n_boot=0), "A")
    # dlog_tokens = dlog_w + dlog_vo_sig + dlog_kappa_sig − dlog_signal_share (exact)
    rhs = row["dlog_w"] + row["dlog_vo_sig"] + row["dlog_kappa_sig"] - row["dlog_signal_share"]
    assert abs(row["dlog_tokens"] - rhs) < IDENTITY_TOL
    # the failure-mode shortfalls split the E0 gap: Σ shortfalls = −dlog_e0 − dlog_w
    total = sum(rule.shortfall(row) for rule in FAILURE_MODE_RULES)
    assert abs(total - (-row["dlog_e0"] - row["dlog_w"])) < IDENTITY_TOL
    # A's traces loop, R's do not: A is much less signal-dense
    assert row["dlog_signal_share"] < -1


@pytest.mark.parametrize(
    ("terms", "label"),
    [
        # logic shortfall 0.4 beats context 0.1 and verbosity 0.2+0.1
        (
            {"dlog_r_logic": -0.4, "dlog_r_ctx": -0.1, "dlog_vo": 0.2, "dlog_kappa": 0.1},
            "logic-limited",
        ),
        (
            {"dlog_r_logic": -0.1, "dlog_r_ctx": -0.5, "dlog_vo": 0.2, "dlog_kappa": 0.1},
            "context-limited",
        ),
        # verbosity 0.5+0.2 = 0.7 dominates
        (
            {"dlog_r_logic": -0.1, "dlog_r_ctx": 0.0, "dlog_vo": 0.5, "dlog_kappa": 0.2},
            "verbosity-limited",
        ),
        # with traces: verbosity uses the signal terms (0.1+0.0), redundancy = −(−0.6) = 0.6
        (
            {
                "dlog_r_logic": 0.0,
                "dlog_r_ctx": 0.0,
                "dlog_vo_sig": 0.1,
                "dlog_kappa_sig": 0.0,
                "dlog_vo": 0.7,
                "dlog_kappa": 0.0,
                "dlog_signal_share": -0.6,
            },
            "redundancy-limited",
        ),
        # outcome layer only: verbosity = dlog_tokens = 0.3
        ({"dlog_r_logic": -0.2, "dlog_r_ctx": 0.0, "dlog_tokens": 0.3}, "verbosity-limited"),
        # equal shortfalls: the earlier rule (logic) wins
        ({"dlog_r_logic": -0.3, "dlog_r_ctx": -0.3, "dlog_tokens": 0.0}, "logic-limited"),
        ({"dlog_r_logic": 0.1, "dlog_r_ctx": 0.0, "dlog_tokens": -0.2}, "no-shortfall"),
        ({}, "undetermined"),
    ],
)
def test_failure_mode_rule_table(terms, label):
    assert failure_mode(terms) == label


def test_failure_mode_margin_and_vectorised_version():
    row = {"dlog_r_logic": -0.03, "dlog_r_ctx": 0.0, "dlog_tokens": 0.0}
    assert failure_mode(row) == "logic-limited"
    assert failure_mode(row, margin=0.05) == "no-shortfall"
    result = decompose(pd.concat([MODEL_A, MODEL_R]), reference="R", n_boot=0)
    labels = failure_modes(result)
    # A: logic −log(8/9) = 0.118, context −log(3/4) = 0.288, verbosity log(13/6)+log(15/13)
    # = log 2.5 = 0.916 -> verbosity-limited; R is the reference: no shortfall
    assert labels.tolist() == ["verbosity-limited", "no-shortfall"]


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.drop(columns="tokens"), "missing column"),
        (
            lambda t: t.assign(tokens=[100, -1, 200, 400]),
            "row 1 (model='A', benchmark='b', instance_id='i2'), field 'tokens'",
        ),
        (lambda t: t.assign(tokens=[100, "many", 200, 400]), "field 'tokens'"),
        (lambda t: t.assign(correct=[1, 2, 0, 0]), "field 'correct': expected a bool"),
        (lambda t: t.assign(truncated=[0, None, 0, 1]), "field 'truncated'"),
        (
            lambda t: t.assign(workload=[10, 0, 10, 20]),
            "field 'workload': expected a finite number > 0",
        ),
        (lambda t: t.assign(workload=[10, None, 10, 20]), "field 'workload': missing, while other"),
        (lambda t: t.assign(instance_id=["i1", "i1", "i3", "i4"]), "duplicate"),
        (lambda t: t.assign(correct=[1, 1, 0, 1]), "'correct' and 'truncated' are both true"),
        (lambda t: t.assign(trace=["a", None, "b", "c"]), "field 'trace': missing"),
        (lambda t: t.assign(trace=["a", 3, "b", "c"]), "field 'trace': expected text"),
    ],
)
def test_bad_input_names_table_row_and_field(change, message):
    with pytest.raises(ValueError, match="instances") as info:
        decompose(change(MODEL_A.copy()), n_boot=0)
    assert message in str(info.value)


def test_truncated_correct_policy_count_incorrect():
    clash = MODEL_A.assign(correct=[1, 1, 0, 1])
    row = _row(decompose(clash, n_boot=0, truncated_correct="count_incorrect"), "A")
    assert row["accuracy"] == 0.5  # instance 4 counted incorrect: back to the hand example


def test_unknown_reference_and_bad_arguments():
    with pytest.raises(ValueError, match="reference model 'Q'"):
        decompose(MODEL_A, reference="Q", n_boot=0)
    with pytest.raises(ValueError, match="n_boot"):
        decompose(MODEL_A, n_boot=-1)
    with pytest.raises(ValueError, match="alpha"):
        decompose(MODEL_A, alpha=1.5)
    with pytest.raises(TypeError, match="DataFrame"):
        decompose([1, 2, 3])  # type: ignore[arg-type]


def test_string_dtypes_and_integer_ids_are_accepted():
    table = MODEL_A.astype({"model": "string", "benchmark": "string"})
    table["instance_id"] = [1, 2, 3, 4]
    table["correct"] = table["correct"].astype("boolean")
    out = normalize_instances(table)
    assert out["instance_id"].tolist() == ["1", "2", "3", "4"]
    assert _row(decompose(table, n_boot=0), "A")["e0"] == pytest.approx(2.0)


def test_the_keys_are_held_as_strings_not_python_objects():
    """The canonical keys stay in pandas' string dtype (one buffer of text), whatever the input
    holds: as Python objects, ten million instances' three keys took 2 GB of the metrics
    stage's peak. Object, integer and string inputs give the same keys and the same paired
    terms."""
    as_objects = MODEL_A.astype({"model": object, "benchmark": object})
    as_objects["instance_id"] = pd.Series(["1", "2", "3", "4"], dtype=object)
    out = normalize_instances(as_objects)
    for key in ("model", "benchmark", "instance_id"):
        assert out[key].dtype != object and pd.api.types.is_string_dtype(out[key])
    with_ints = as_objects.assign(instance_id=[1, 2, 3, 4])
    reference = with_ints.assign(model="R", tokens=[50, 150, 100, 200])
    paired = decompose(pd.concat([with_ints, reference]), reference="R", n_boot=0)
    row = _row(paired, "A")
    assert row["n_paired"] == 4
    # A's tokens are twice R's on every shared instance: dlog_tokens = log 2
    assert row["dlog_tokens"] == pytest.approx(math.log(2))


# ------------------------------------------------------------------------------ properties


@st.composite
def paired_tables(draw):
    n = draw(st.integers(2, 30))
    tables = []
    for _ in ("M", "R"):
        completed = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        correct = [c and draw(st.booleans()) for c in completed]
        # make every factor positive so the identity is between finite numbers
        completed[0], correct[0] = True, True
        tokens = draw(st.lists(st.floats(1, 1e5), min_size=n, max_size=n))
        tables.append((completed, correct, tokens))
    workload = draw(st.lists(st.floats(0.5, 1e3), min_size=n, max_size=n))
    frames = [
        _table(m, c, [not x for x in comp], t, workload)
        for m, (comp, c, t) in zip(("M", "R"), tables, strict=True)
    ]
    return pd.concat(frames)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paired_tables())
def test_identity_holds_for_random_valid_inputs(table):
    result = decompose(table, reference="R", n_boot=0)
    for _, row in result.iterrows():
        # E0 = 1000·r_ctx·r_logic/E[T]
        assert row["e0"] == pytest.approx(
            1000 * row["r_ctx"] * row["r_logic"] / row["mean_tokens"], rel=1e-12
        )
        # E[T] = E[W]·VŌ·κ
        assert row["mean_tokens"] == pytest.approx(
            row["mean_workload"] * row["vo"] * row["kappa"], rel=1e-12
        )
        rhs = (
            row["dlog_r_ctx"]
            + row["dlog_r_logic"]
            - row["dlog_w"]
            - row["dlog_vo"]
            - row["dlog_kappa"]
        )
        assert abs(row["dlog_e0"] - rhs) < IDENTITY_TOL


@settings(max_examples=20, deadline=None)
@given(paired_tables(), st.integers(0, 2**16))
def test_identity_holds_in_every_bootstrap_resample_interval_order(table, seed):
    result = decompose(table, reference="R", n_boot=50, seed=seed)
    for col in ("e0", "r_ctx", "vo", "kappa", "dlog_e0", "dlog_vo"):
        lo, hi = result[f"{col}_lo"], result[f"{col}_hi"]
        assert ((lo <= hi) | lo.isna()).all()


# ------------------------------------------------------------------------------ trace audits


def test_compression_ratio_formula():
    text = "Let x be 3. Then 2x = 6, so the answer is 6. " * 20
    raw = text.encode()
    assert compression_ratio(text) == len(zlib.compress(raw, 9)) / len(raw)
    assert compression_ratio("ab") == 1.0  # 2 bytes -> 10 compressed bytes: capped
    assert compression_ratio("") == 1.0
    assert compression_ratio(text) < compression_ratio(text[:46])
    with pytest.raises(TypeError):
        compression_ratio(None)  # type: ignore[arg-type]


def test_truncation_loop_audit_by_hand():
    # the last 24 chars are "a b c d " × 3: 12 words, 9 4-gram positions, 4 distinct 4-grams
    # -> repeated share (9−4)/9 = 5/9; the prompt holds the 4-gram (a b c d), which fills
    # positions 0, 4, 8 of the window -> prompt-copy share 3/9
    trace = "alpha beta gamma delta " + "a b c d " * 3
    table = pd.DataFrame(
        {
            "model": ["m", "m"],
            "benchmark": ["b", "b"],
            "instance_id": ["1", "2"],
            "truncated": [True, False],
            "trace": [trace, "done"],
            "prompt": ["please say a b c d now", "x"],
        }
    )
    audit = truncation_loop_audit(table, window_chars=24)
    assert len(audit) == 1  # only the truncated output
    assert audit["window_chars"].iloc[0] == 24
    assert audit["repeat_share"].iloc[0] == pytest.approx(5 / 9)
    assert audit["prompt_copy_share"].iloc[0] == pytest.approx(3 / 9)
    assert math.isnan(repeated_ngram_share("a b c"))  # fewer than 4 words
    assert prompt_copy_share("one two three four", "ONE two three four") == 1.0
    no_prompt = truncation_loop_audit(table.drop(columns="prompt"), window_chars=24)
    assert np.isnan(no_prompt["prompt_copy_share"].iloc[0])


def test_oracle_early_stop_with_a_checker():
    # 10 words, T = 200 tokens; the answer "7" first appears as word 4 (ends at char 9 of 35)
    trace = "so x is 7 because 3 plus 4 equals 7"
    assert len(trace) == 35
    table = pd.DataFrame(
        {
            "model": ["m"],
            "benchmark": ["b"],
            "instance_id": ["1"],
            "tokens": [200],
            "trace": [trace],
        }
    )
    prefixes = prefix_checks(
        table, lambda row, text: text.split()[-1] == "7" or " 7 " in text, n_prefixes=5
    )
    # 10 words, 5 cuts after words 2, 4, 6, 8, 10 -> ends at chars 4, 9, 19, 26, 35
    assert prefixes["prefix_tokens"].tolist() == pytest.approx(
        [200 * 4 / 35, 200 * 9 / 35, 200 * 19 / 35, 200 * 26 / 35, 200.0]
    )
    assert prefixes["correct"].tolist() == [False, True, True, True, True]
    result = oracle_early_stop(table, prefixes).iloc[0]
    # T_first = 200·9/35; gain = 35/9; wasted tail = 1 − 9/35 = 26/35
    assert result["gain"] == pytest.approx(35 / 9)
    assert result["wasted_tail"] == pytest.approx(26 / 35)
    assert bool(result["has_correct_prefix"])


def test_tokens_by_outcome_by_hand():
    out = tokens_by_outcome(MODEL_A).iloc[0]
    # correct: 100, 300 -> 200; incorrect: 200, 400 -> 300; truncated: 400
    assert (out["mean_tokens_correct"], out["mean_tokens_incorrect"]) == (200, 300)
    assert out["mean_tokens_truncated"] == 400 and out["n_truncated"] == 1
