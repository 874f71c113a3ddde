"""The worked examples of docs/extending.md, run as written (issue 44, item 5).

Each fenced ``python`` block that follows an ``<!-- example: NAME -->`` marker in the page is
code of example NAME; an example's blocks run in order, in one namespace, for real: the toy
metric is registered and computed, the example format ingests a file into a store and the real
grader grades it, the example rule changes a real grade, the example page is opened headless
on the demo store through a copy of ``app.py`` that registers it, and the example engine is
built by ``make_engine`` and held to the engine contract of ``tests/backend_contract.py``.

The blocks' own ``assert`` lines check the numbers the page gives; the tests check more. Every
registry an example writes to is put back as it was by a fixture, so no example reaches
another test.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import types
from collections.abc import Iterator, MutableMapping, MutableSequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests import backend_contract

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"
DEMO_STORE = REPO / "results" / "demo"
#: The marker line, then the fenced block it marks.
_EXAMPLE = re.compile(
    r"^<!-- example: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE
)


def example_blocks(markdown: str) -> dict[str, list[tuple[int, str]]]:
    """Example name -> its blocks as (line of the block's first code line, code), in order.

    >>> text = "x\\n<!-- example: a -->\\n```python\\nn = 1\\n```\\n```python\\nnot = run\\n```\\n"
    >>> example_blocks(text)
    {'a': [(4, 'n = 1\\n')]}
    """
    found: dict[str, list[tuple[int, str]]] = {}
    for match in _EXAMPLE.finditer(markdown):
        line = markdown.count("\n", 0, match.start("code")) + 1
        found.setdefault(match["name"], []).append((line, match["code"]))
    return found


BLOCKS = example_blocks(PAGE.read_text(encoding="utf-8"))


def run_example(name: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run every block of example ``name`` in ``namespace``; a traceback names the page's
    own line numbers."""
    for line, code in BLOCKS[name]:
        # Blank lines before the code put each statement on its line of the page.
        compiled = compile("\n" * (line - 1) + code, str(PAGE), "exec")
        exec(compiled, namespace)
    return namespace


def as_module(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The namespace of a new module importable as ``name`` for the rest of the test (what a
    file at that path would be), for code the registries import by name."""
    module = types.ModuleType(name)
    module.__file__ = str(PAGE)
    monkeypatch.setitem(sys.modules, name, module)
    return module.__dict__


@pytest.fixture
def restore() -> Iterator[Any]:
    """``restore(registry, ...)`` remembers each dict or list as it is now; the test's end
    puts every one back in place (the same object, so every module that holds it sees it)."""
    saved: list[tuple[Any, Any]] = []

    def remember(*registries: MutableMapping[Any, Any] | MutableSequence[Any]) -> None:
        saved.extend((r, r.copy()) for r in registries)

    yield remember
    for registry, before in reversed(saved):
        if isinstance(registry, MutableMapping):
            registry.clear()
            registry.update(before)
        else:
            registry[:] = before


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The examples write their files (a store, a corpus) into the current folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_page_marks_one_example_per_extension_point() -> None:
    assert set(BLOCKS) == {
        "metric",
        "format",
        "rule",
        "page",
        "page-registration",
        "engine",
        "engine-registration",
    }
    assert [len(BLOCKS[n]) for n in ("page", "page-registration", "engine-registration")] == [
        1,
        1,
        1,
    ]


def test_the_metric_example_registers_a_median_and_computes_it(restore: Any) -> None:
    from legival_core.metrics.registry import (
        AGGREGATES,
        METRIC_SPECS,
        aggregate_teacher,
        metric_index_markdown,
    )

    restore(AGGREGATES, METRIC_SPECS)
    assert "median_tokens" not in METRIC_SPECS
    run_example("metric", {})
    # Registered: the registry's own functions see it.
    assert METRIC_SPECS["median_tokens"].aggregate == "median"
    assert "| `median_tokens` | [Median tokens](tokens.md) |" in metric_index_markdown()
    # Another teacher, worked by hand: 7 values, the middle one of 10 20 30 40 50 60 1000 is 40
    # (the NaN row has no value); the mean would be 1210 / 7 = 172.9.
    rows = pd.DataFrame({"tokens": [1000, 10, 40, None, 20, 60, 30, 50]})
    assert aggregate_teacher("median_tokens", rows) == 40.0
    # Any split of the rows merges to the same value.
    aggregate = AGGREGATES["median"]
    for cut in range(len(rows) + 1):
        parts = [aggregate.partial(p, ("tokens",)) for p in (rows[:cut], rows[cut:])]
        assert aggregate.finalize(aggregate.merge(*parts)) == 40.0


def test_the_format_example_ingests_a_file_of_its_tool(
    restore: Any, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from legival_core.store.store import Store
    from precompute.formats import FORMATS
    from precompute.ingest import ingest

    restore(FORMATS)
    namespace = run_example("format", as_module("precompute.formats.step_list", monkeypatch))
    # A record of another tool is not one of its records, and a bad record costs itself only.
    step_list = namespace["StepListFormat"]()
    lm_eval_record = {"doc_id": 0, "resps": [["x"]], "target": "4"}
    assert not step_list.sniff_record(frozenset(lm_eval_record), lm_eval_record)
    lines = [
        {"qid": "a", "question": "2+2?", "steps": ["2 and 2 make 4."], "final": "4",
         "reference": "4", "model": "m"},
        {"qid": "b", "question": "3+3?", "steps": ["six", 6], "final": "6", "reference": "6",
         "model": "m"},
    ]  # fmt: skip
    (workdir / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    report = ingest(workdir / "mixed.jsonl", workdir / "mixed", None, file_format="step-list")
    assert report.kept == 1
    [bad] = report.quarantined
    assert bad.field == "steps[1]" and "expected text" in bad.reason
    assert Store.open(workdir / "mixed").read("traces")["teacher"].tolist() == ["m"]


def test_the_rule_example_rejects_an_approximation_for_an_exact_gold(restore: Any) -> None:
    from legival_core.grading.rules import REJECTION_RULES

    restore(REJECTION_RULES)
    count = len(REJECTION_RULES)
    namespace = run_example("rule", {})
    assert len(REJECTION_RULES) == count + 1
    graded = namespace["graded"]
    # The rule names itself in the explanation of the grade it decided.
    verdicts = [why for *_, why in graded("So \\boxed{\\approx 7}.", "7").considered]
    assert any("approximation_for_an_exact_gold" in why for why in verdicts), verdicts
    # "≈" and the words count as much as \approx.
    assert not graded("The answer is \\boxed{≈ 7}.", "7").grade.correct
    assert not graded("The answer is \\boxed{about 7}.", "7").grade.correct
    assert graded("Therefore, \\boxed{7}.", "7").grade.correct


def test_the_rule_example_is_gone_after_its_test() -> None:
    from legival_core.grading.rules import REJECTION_RULES

    assert "approximation_for_an_exact_gold" not in {rule.name for rule in REJECTION_RULES}


def _app_with_page(folder: Path) -> tuple[Path, str]:
    """A copy of ``app.py`` whose ``PAGES`` hold the example page (registered before About, as
    the page says), beside ``pages/`` holding the project's pages and the example. Returns the
    app's path and the page's script path."""
    [(_, registration)] = BLOCKS["page-registration"]
    [(_, page_code)] = BLOCKS["page"]
    match = re.search(r'st\.Page\("(pages/\w+\.py)"', registration)
    assert match, registration
    script = match[1]
    (folder / "pages").mkdir(parents=True)
    for page in (REPO / "pages").glob("*.py"):
        (folder / "pages" / page.name).symlink_to(page)
    (folder / script).write_text(page_code, encoding="utf-8")
    shutil.copytree(REPO / ".streamlit", folder / ".streamlit")
    source = (REPO / "app.py").read_text(encoding="utf-8")
    about = '    st.Page("pages/about.py"'
    assert source.count(about) == 1, "app.py no longer registers the About page this way"
    source = source.replace(about, "    " + registration.strip() + "\n" + about)
    (folder / "app.py").write_text(source, encoding="utf-8")
    return folder / "app.py", script


def test_the_page_example_draws_one_box_per_teacher_of_the_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from legival_core.store.store import Store
    from legival_core.text.safe_text import plotly_literal

    st.cache_data.clear()
    st.cache_resource.clear()
    app, script = _app_with_page(tmp_path / "app")
    lengths = Store.open(DEMO_STORE).read("trace_efficiency", columns=["teacher", "dataset"])
    dataset = sorted(lengths["dataset"].unique())[-1]
    monkeypatch.setenv("LEGIVAL_STORE", str(DEMO_STORE))
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(str(app), default_timeout=120)
    at.run()  # once, so that st.navigation has registered the pages
    at.query_params.clear()
    at.switch_page(script)
    at.query_params["dataset"] = dataset  # as a link to /lengths?dataset=... opens it
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "📏 Trace lengths"
    assert next(s for s in at.selectbox if s.label == "Dataset").value == dataset
    [chart] = at.get("plotly_chart")
    figure = json.loads(chart.proto.spec)
    shown = {x for trace in figure["data"] for x in trace["x"]}
    teachers = lengths.loc[lengths["dataset"] == dataset, "teacher"].unique()
    assert shown == {plotly_literal(t) for t in teachers}
    rows = int((lengths["dataset"] == dataset).sum())
    assert f"{rows:,} traces." in [caption.value for caption in at.caption]


def test_the_engine_example_keeps_the_engine_contract(
    restore: Any, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from precompute.backends import ENGINES, make_engine

    restore(ENGINES)
    namespace = as_module("precompute.backends.ngram_engine", monkeypatch)
    [(_, registration)] = BLOCKS["engine-registration"]
    # The registration is one entry of the ENGINES dict literal of registry.py.
    ENGINES.update(eval("{" + registration + "}"))  # the page's own text, nothing else
    run_example("engine", namespace)
    engine = make_engine("ngram", str(workdir / "corpus.txt"))
    assert type(engine).__name__ == "NgramEngine"
    # Every check the real engines are held to (tests/test_backends.py), the continuation of
    # an assistant message included: "1, 2, 3, 4," goes on with 5.
    for name in backend_contract.__all__:
        getattr(backend_contract, name)(engine)
    # Sampling: reproducible from the request's seed, and it leaves the greedy path.
    request = backend_contract.chat("s", "Name a fruit.", max_tokens=12, temperature=1.0, n=4)
    texts = [c.text for c in engine.generate([request])]
    assert texts == [c.text for c in engine.generate([request])]
    assert len(set(texts)) > 1


def test_an_unknown_engine_is_still_unknown_after_the_engine_example() -> None:
    from precompute.backends import ENGINES

    assert "ngram" not in ENGINES and "precompute.backends.ngram_engine" not in sys.modules
