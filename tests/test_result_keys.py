"""One frozen key value per stored page result (issue 44 item 1, "one read path").

The metrics stage stores each page result under the key value of the page's default
selection, and the page asks with the key value of its own selection: both go through
:meth:`legival_core.metrics.page_results.ResultKey.key`. These tests check that every stored
kind has one key class, that the keys the new classes build for the pages' default selections
are byte for byte the texts the bundled demo store holds (so its rows stay valid), and that a
bare tuple is refused. The slow twin in ``test_page_results.py`` spies on every page's reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from legival_core.metrics import page_results
from legival_core.metrics.page_results import (
    INPUTS,
    KEYS,
    DecompositionSelection,
    MonitorSelection,
    RedundancySelection,
    ResultKey,
    RewardSelection,
    RobustnessSelection,
    TransferSelection,
    WholeStore,
    inputs_stamp,
    page_results_rows,
    stored_frame,
)
from legival_core.rankings.selection import Selection
from legival_core.store.store import Store

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"


def test_every_stored_result_has_one_key_class() -> None:
    """The registry names a key class for every result whose inputs are listed, and no other;
    each class keys the results the registry gives it."""
    assert set(KEYS) == set(INPUTS)
    for name, cls in KEYS.items():
        assert name in cls.RESULTS, name
    assert {KEYS[n] for n in ("board_intervals", "board_resamples", "pareto_resamples")} == {
        Selection
    }


def _default_keys(store: Store) -> set[tuple[str, str]]:
    """(name, selection text) of every result the pages ask for on their first view of
    ``store``, built from the key classes with the pages' defaults."""
    from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
    from legival_core.metrics.redundancy_sweep_view import recorded_threshold
    from legival_core.metrics.transfer import PROFILES
    from legival_core.rankings.robustness_choices import Settings, settings_key
    from legival_core.rankings.selection import RANK_RESAMPLES

    manifest = store.manifest
    values: list[ResultKey] = [Selection(), MonitorSelection(), TransferSelection(), WholeStore()]
    keys = {(name, value.key(name)) for value in values for name in value.RESULTS}
    for profile in PROFILES:  # the Profile widget's every choice
        keys.add(("transfer_coverage", TransferSelection(profile=profile).key("transfer_coverage")))
    for model in store.read("rewards", columns=["reward_model"])["reward_model"].unique():
        keys |= {(n, RewardSelection(model).key(n)) for n in ("reward_points", "teacher_rewards")}
        keys |= {  # the page's two headline ρ and its table of all four
            ("reward_rho", RewardSelection(model, level=level, correct_only=only).key("reward_rho"))
            for level in ("trace", "teacher")
            for only in (False, True)
        }
    for benchmark in store.read("decomposition", columns=["benchmark"])["benchmark"].unique():
        value = DecompositionSelection(benchmark)
        keys |= {(name, value.key(name)) for name in value.RESULTS}
    recorded = recorded_threshold(manifest)
    chosen = REDUNDANCY_THRESHOLDS["paper"] if recorded is None else recorded
    keys.add(("redundancy_sweep", RedundancySelection(chosen).key("redundancy_sweep")))
    settings = settings_key(Settings.from_manifest(manifest))
    for n_boot in (0, RANK_RESAMPLES):  # the leaderboard's marks and the Robustness page
        value = RobustnessSelection(settings, n_boot)
        keys |= {(name, value.key(name)) for name in value.RESULTS}
    return keys


def test_the_pages_default_keys_are_the_demo_stores_current_rows() -> None:
    """Every current row of the bundled demo's ``page_results`` is keyed as the key classes
    key the pages' default selections, and every such key has a current row: the rows the
    stage wrote before the key classes existed stay valid. (Rows of an older stage run,
    whose stamps are stale, are ignored by every reader and left out here.)"""
    store = Store.open(DEMO)
    rows = store.read("page_results", columns=["name", "selection", "inputs_stamp"])
    current = {
        (name, selection)
        for name, selection, stamp in zip(
            rows["name"], rows["selection"], rows["inputs_stamp"], strict=True
        )
        if stamp == inputs_stamp(store.manifest, INPUTS[name])
    }
    # every kind of stored result is in the demo, so each key class is checked on it
    assert {name for name, _ in current} == set(INPUTS)
    assert current == _default_keys(store)


def test_the_key_texts_are_the_ones_stores_hold() -> None:
    """The texts written before the key classes (the positional tuples of the stage, as JSON),
    spelled out by hand."""
    assert MonitorSelection().key("monitor_scores") == "[500]"
    assert MonitorSelection().key("monitor_legibility") == '[500, false, "common"]'
    reward = RewardSelection("rm", level="teacher", correct_only=True)
    assert reward.key("reward_rho") == '["rm", null, "teacher", true, false, "common"]'
    assert reward.key("reward_points") == '["rm", null, true]'
    assert reward.key("teacher_rewards") == '["rm", null, true, false, "common"]'
    assert TransferSelection(profile="release").key("transfer_coverage") == (
        '[null, null, "release"]'
    )
    assert TransferSelection("d", "s").key("transfer_leaks") == '["d", "s"]'
    assert DecompositionSelection("champ-sequence", True).key("decomposition_audits") == (
        '["champ-sequence", true]'
    )
    assert RedundancySelection(0.85).key("redundancy_sweep") == "[0.85]"
    assert (
        RobustnessSelection('{"a": 1}', 0, 0).key("robustness_summary") == '[0, 0, "{\\"a\\": 1}"]'
    )
    assert WholeStore().key("attribution_traces") == "[]"
    assert Selection().key("board_resamples") == '[null, null, 1000, 0, false, "common"]'


def test_a_page_and_the_stage_agree_through_one_value() -> None:
    """A row stored under a key value is found by an equal value built apart (the page's
    widgets give the same selection), and not by a value of another selection."""
    manifest = {"tables": {"rollouts": {"rows": 4, "parts": [{"blake2b": "1"}]}}}
    frame = pd.DataFrame({"teacher": ["t"], "covered": [3]})
    rows = page_results_rows(
        [("transfer_coverage", TransferSelection(profile="release"), frame)], manifest
    ).to_pandas()
    asked = TransferSelection(dataset=None, student=None, profile="release")
    got = stored_frame(rows, manifest, "transfer_coverage", asked)
    assert got is not None and got["covered"].tolist() == [3]
    assert stored_frame(rows, manifest, "transfer_coverage", TransferSelection()) is None


def test_a_bare_tuple_or_another_kind_of_key_is_refused() -> None:
    """Keys are never built by hand: a tuple names the key class to use instead, and a key
    value of another result's class names what it keys."""
    manifest: dict[str, object] = {"tables": {}}
    frame = pd.DataFrame({"f1": [0.5]})
    with pytest.raises(TypeError, match="MonitorSelection"):
        page_results_rows([("monitor_scores", (500,), frame)], manifest)  # type: ignore[list-item]
    rows = page_results_rows([("monitor_scores", MonitorSelection(), frame)], manifest)
    with pytest.raises(TypeError, match="MonitorSelection"):
        stored_frame(rows.to_pandas(), manifest, "monitor_scores", (500,))  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="TransferSelection does not key 'monitor_scores'"):
        stored_frame(rows.to_pandas(), manifest, "monitor_scores", TransferSelection())


def test_two_classes_cannot_key_one_result() -> None:
    """A second class claiming a stored result is refused when it is defined."""
    with pytest.raises(TypeError, match="keyed by MonitorSelection already"):

        class Twice(ResultKey):
            RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {"monitor_scores": ()}

    assert page_results.KEYS["monitor_scores"] is MonitorSelection
