"""Lexical backtracking detector and the agreement statistics (Spearman ρ, Cohen's κ)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.metrics.backtracking import (
    CUE_PHRASES,
    FAMILY_ALIASES,
    OFFLINE_LABELERS,
    backtracking_agreement,
    cohen_kappa,
    context_backtracking,
    context_reasons,
    count_spearman,
    cue_phrases,
    lexical_backtracking,
    offline_backtracking,
    register_cues,
)
from legival_core.text.segment import Step

# ----------------------------------------------------------------------- lexical detector


def test_math_cues_at_step_start_are_flagged_with_one_based_numbers():
    steps = [
        "Let x be the number of apples.",  # 1
        "Then 3x = 12, so x = 4.",  # 2
        "Wait, the problem says 15 apples.",  # 3 flagged
        "So 3x = 15 and x = 5.",  # 4
        "Alternatively, divide directly: 15/3 = 5.",  # 5 flagged
        "Let me double-check: 3 * 5 = 15.",  # 6 flagged
        "The answer is 5.",  # 7
    ]
    assert lexical_backtracking(steps, family="math") == [3, 5, 6]


def test_cue_must_open_the_step_and_be_a_whole_word():
    steps = [
        "Butterflies have 6 legs.",  # "but" inside a longer word: no
        "Waiting does not help here.",  # "wait" inside "waiting": no
        "We could wait, but that is slow.",  # cue in the middle: no
        "Hmmm is not a cue, but hmm is.",  # "hmmm" is a different word: no
        "HOWEVER, the sum is odd.",  # case-insensitive: yes (5)
    ]
    assert lexical_backtracking(steps, family="math") == [5]


def test_markdown_bullets_numbers_and_quotes_before_the_cue_are_skipped():
    steps = [
        "**Wait**, that's off by one.",  # 1
        "- Hmm, check the sign.",  # 2
        "3. Actually the base case is n = 0.",  # 3
        '"On second thought", I said.',  # 4
        "> Going back to step 2.",  # 5
        "(b) Alternatively use induction.",  # 6
        "2. Compute the sum.",  # not a cue
    ]
    assert lexical_backtracking(steps, family="math") == [1, 2, 3, 4, 5, 6]


def test_typographic_apostrophe_matches_plain_one():
    assert lexical_backtracking(["That’s not right."], "math") == [1]
    assert lexical_backtracking(["That's not right."], "math") == [1]


def test_families_use_their_own_rubric():
    steps = ["Correction: the constant is 6.67e-11.", "But the mass is 5 kg."]
    # "correction" belongs to the science rubric; "but" is a math/puzzle cue only.
    assert lexical_backtracking(steps, family="science") == [1]
    assert lexical_backtracking(steps, family="math") == [2]
    puzzle = ["Group: APPLE, PEAR, PLUM, FIG.", "That leaves BASS, PIKE, CARP, EEL."]
    assert lexical_backtracking(puzzle, family="puzzles") == [2]


def test_aliases_resolve_to_families_and_accept_step_objects():
    assert FAMILY_ALIASES["gpqa"] == "science"
    assert cue_phrases("connections") == CUE_PHRASES["puzzles"]
    steps = [Step("Energy is conserved.", 0, 20), Step("I forgot the 1/2.", 21, 38)]
    assert lexical_backtracking(steps, family="gpqa") == [2]


def test_unknown_family_is_a_clear_error():
    with pytest.raises(ValueError, match="no backtracking cues for family 'poetry'"):
        lexical_backtracking(["Wait."], family="poetry")


def test_register_cues_adds_a_family_and_refreshes_the_pattern(monkeypatch):
    monkeypatch.setitem(CUE_PHRASES, "logic", ("wait",))
    assert lexical_backtracking(["Contradiction found."], "logic") == []
    register_cues("logic", ["Contradiction", "  "])
    assert lexical_backtracking(["Contradiction found."], "logic") == [1]
    with pytest.raises(ValueError, match="no cue phrases"):
        register_cues("empty", [" "])


def test_non_text_step_is_rejected():
    with pytest.raises(TypeError, match="step 2"):
        lexical_backtracking(["ok", 3], "math")


def test_empty_trace_has_no_flags():
    assert lexical_backtracking([], "math") == []


# ------------------------------------------------------------------- context-aware cues


def test_a_contrastive_connective_is_not_a_revision():
    """Issue 38: of the demo's 102 lexical flags, 88 open with "However" and 7 with "But",
    mostly ordinary connectives. The context-aware cues read what the step says."""
    steps = [
        "Given that f(0) = a_0 is odd, the sum of the other coefficients is even.",
        "However, since a_n ≠ 0, at least one of these coefficients must be non-zero.",
        "But a_0 is odd, so any integer root must also be odd.",
        "However, we can conclude that there are no trivial solutions.",
    ]
    assert lexical_backtracking(steps, "math") == [2, 3, 4]
    assert context_backtracking(steps, "math") == []


@pytest.mark.parametrize(
    ("before", "step", "reason"),
    [
        # rubric 1: a line of attack abandoned as a dead end, anywhere in the step
        (
            "We look for combinations of these factors.",
            "However, this is a non-trivial problem, and there's no straightforward method.",
            "dead end or revision: 'no straightforward method'",
        ),
        ("Try the substitution u = x^2.", "This substitution does not work.", "dead end"),
        # rubric 2: a revision of its own earlier result
        ("So there are 6 triples.", "But we would count them twice in our previous solution.",
         "dead end or revision: 'our previous solution'"),
        ("Thus a = 8/3.", "So we must have made an incorrect assumption.", "dead end"),
        # rubric 3: a doubt about earlier work
        ("The minimum is 1/(3a).", "However, we need to be careful here.", "dead end"),
        ("The bound holds.", "But we have not yet shown that it is attained.", "dead end"),
        # rubric 4: another approach
        ("We check 1000 to 9999.", "However, there is a more systematic way to do this.",
         "another approach: 'more systematic way'"),
        ("Expand the product.", "Instead, let's try induction.", "opens with a revision cue"),
        ("x = 5.", "Wait, the problem says 15 apples.", "opens with a revision cue: 'Wait'"),
        ("x = 5.", "**Let me double-check** the count.", "opens with a revision cue"),
    ],
)  # fmt: skip
def test_context_cues_find_the_rubrics_kinds_of_backtracking(before, step, reason):
    found = context_reasons([before, step], "math")
    assert list(found) == [2]
    assert found[2].startswith(reason)


def test_context_cues_read_the_step_before():
    # A new plan right after a dead end is a change of approach (rubric 4) ...
    dead_end = [
        "Since f''(0) = 0, the second derivative test is inconclusive for x = 0.",
        "However, we can check the endpoints to find the minimum.",
    ]
    assert context_reasons(dead_end) == {
        1: "dead end or revision: 'is inconclusive'",
        2: "a new plan right after the dead end of step 1",
    }
    # ... the same step after a step that reached its result is not.
    assert context_backtracking(["So f(0) = 2 is the minimum.", dead_end[1]]) == []
    # A look back right after a doubt re-checks earlier work (rubric 3).
    doubt = ["However, we need to be careful here.", "The above inequality holds for all a."]
    assert context_backtracking(doubt) == [1, 2]
    assert context_backtracking(["Now fix a.", doubt[1]]) == []


def test_context_cues_leave_out_what_the_rubric_leaves_out():
    steps = [
        "Suppose such an n exists.",
        "Then n^2 is odd, which is a contradiction.",  # the planned end of a proof
        "Alternatively, one can see this by counting pairs.",  # a second method
        "Check: 3 + 4 = 7.",  # a routine check
        "The partial solution provided is incorrect, so we start afresh.",  # not its own work
        "Instead of 12 there are 15 terms, since the list starts at 0.",  # no new plan
    ]
    assert context_backtracking(steps) == []


def test_context_cues_per_family_and_aliases():
    assert context_backtracking(["x.", "I forgot the 1/2."], "gpqa") == [2]
    assert context_backtracking(["x.", "I forgot the 1/2."], "math") == []
    assert context_backtracking(["A, B.", "That leaves BASS, PIKE."], "connections") == [2]
    steps = [Step("Energy is conserved.", 0, 20), Step("Hmm, the sign is off.", 21, 42)]
    assert context_backtracking(steps, "science") == [2]
    with pytest.raises(ValueError, match="no backtracking cues for family 'poetry'"):
        context_backtracking(["Wait."], family="poetry")
    with pytest.raises(TypeError, match="step 2"):
        context_backtracking(["ok", 3])


def test_offline_labelers_by_name():
    steps = ["x = 1.", "But x > 0.", "Wait, x = 2."]
    assert offline_backtracking("lexical", steps) == [2, 3]
    assert offline_backtracking("cues", steps) == [3]
    assert sorted(OFFLINE_LABELERS) == ["cues", "lexical"]
    with pytest.raises(ValueError, match="unknown offline backtracking labeler 'judge'"):
        offline_backtracking("judge", steps)


# --------------------------------------------------------------------------- Spearman ρ


def test_spearman_hand_worked_without_ties():
    # ranks a = 1,2,3,4,5 ; b = [10, 30, 20, 50, 40] → ranks 1,3,2,5,4
    # d = 0,-1,1,-1,1 → Σd² = 4 ; ρ = 1 − 6·4 / (5·(25−1)) = 1 − 24/120 = 0.8
    assert count_spearman([1, 2, 3, 4, 5], [10, 30, 20, 50, 40]) == pytest.approx(0.8)


def test_spearman_hand_worked_with_ties():
    # a = [0, 0, 1, 2] → average ranks 1.5, 1.5, 3, 4 ; b = [0, 1, 1, 3] → 1, 2.5, 2.5, 4
    # centred: a' = −1, −1, 0.5, 1.5 ; b' = −1.5, 0, 0, 1.5   (means 2.5)
    # Σa'b' = 1.5 + 0 + 0 + 2.25 = 3.75 ; Σa'² = 1 + 1 + 0.25 + 2.25 = 4.5 ; Σb'² = 4.5
    # ρ = 3.75 / 4.5 = 0.8333…
    assert count_spearman([0, 0, 1, 2], [0, 1, 1, 3]) == pytest.approx(3.75 / 4.5)


def test_spearman_undefined_cases_are_nan():
    assert math.isnan(count_spearman([1], [2]))  # one trace
    assert math.isnan(count_spearman([2, 2, 2], [0, 1, 2]))  # constant labeling
    with pytest.raises(ValueError, match="3 labels against 2"):
        count_spearman([1, 2, 3], [1, 2])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 6)),
        min_size=3,
        max_size=40,
    )
)
def test_spearman_matches_scipy(pairs):
    from scipy.stats import spearmanr

    a, b = (list(x) for x in zip(*pairs, strict=True))
    ours = count_spearman(a, b)
    if len(set(a)) < 2 or len(set(b)) < 2:
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)


# ----------------------------------------------------------------------------- Cohen's κ


def test_kappa_two_by_two_by_hand():
    # 10 traces; rows = labeler a, columns = labeler b:
    #            b=yes  b=no
    #   a=yes      4      1      (a says yes 5 times)
    #   a=no       2      3      (a says no 5 times)
    # p_o = (4+3)/10 = 0.7 ; marginals a: 0.5/0.5, b: 0.6/0.4
    # p_e = 0.5·0.6 + 0.5·0.4 = 0.5 ; κ = (0.7−0.5)/(1−0.5) = 0.4
    a = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 1, 1, 0, 0, 0]
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_kappa_three_by_three_by_hand():
    # counts 0/1/2 on 9 traces; confusion (a rows, b columns):
    #        0  1  2
    #   0    2  1  0    a-row sums 3, 3, 3 → 1/3 each
    #   1    0  2  1    b-column sums 2, 4, 3 → 2/9, 4/9, 3/9
    #   2    0  1  2
    # p_o = (2+2+2)/9 = 2/3 ; p_e = (1/3)(2/9 + 4/9 + 3/9) = 1/3
    # κ = (2/3 − 1/3) / (1 − 1/3) = 0.5
    a = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    b = [0, 0, 1, 1, 1, 2, 1, 2, 2]
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    # binary (any backtracking): a>0 = [F,F,F,T,T,T,T,T,T], b>0 = [F,F,T,T,T,T,T,T,T]
    # table: (F,F)=2, (F,T)=1, (T,T)=6 ; p_o = 8/9
    # p_e = (3/9)(2/9) + (6/9)(7/9) = 6/81 + 42/81 = 48/81
    # κ = (72/81 − 48/81) / (33/81) = 24/33
    assert cohen_kappa(a, b, binary=True) == pytest.approx(24 / 33)


def test_kappa_edges():
    assert cohen_kappa([0, 1, 2], [0, 1, 2]) == 1.0
    assert math.isnan(cohen_kappa([3, 3], [3, 3]))  # p_e = 1: undefined
    assert math.isnan(cohen_kappa([], []))
    # complete disagreement on balanced binary labels: p_o = 0, p_e = 0.5 → κ = −1
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=40))
def test_kappa_matches_sklearn(pairs):
    from sklearn.metrics import cohen_kappa_score

    a, b = (np.array(x) for x in zip(*pairs, strict=True))
    ours = cohen_kappa(a, b)
    if len(set(a) | set(b)) == 1:
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_agreement_bundles_all_three():
    judge = [0, 2, 1, 0, 3]
    lexical = [0, 1, 1, 0, 4]
    result = backtracking_agreement(judge, lexical)
    assert result.n_traces == 5
    assert result.spearman == pytest.approx(count_spearman(judge, lexical))
    assert result.kappa_exact == pytest.approx(cohen_kappa(judge, lexical))
    # binary labels agree everywhere (zeros at the same traces) → κ = 1
    assert result.kappa_binary == 1.0
