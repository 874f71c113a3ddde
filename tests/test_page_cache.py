"""The pages' shared caches (``pages.common``): a big frame is cached once for every session
(``st.cache_resource``, never pickled), and a page that changes the frame it got must not
change what the next caller gets.

The script below runs under Streamlit's AppTest on the bundled demo store (read only): it
takes the shared frames, changes them in place (a value set, a column added, a column
deleted, the index replaced), then takes them again and records what it got.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.store.store import Store

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def _script() -> None:
    """The page under test (AppTest runs this function's body as a script)."""
    import numpy as np
    import pandas as pd
    import streamlit as st

    from pages import common

    @common.derived("test_shared_frame", shared=True)
    def numbers() -> pd.DataFrame:
        return pd.DataFrame({"x": [1.0, 2.0, 3.0], "name": ["a", "b", "c"]})

    first = numbers()
    first.loc[0, "x"] = 99.0
    first["added"] = 1
    del first["name"]
    first.index = [7, 8, 9]
    again = numbers()

    traces = common.load_table("traces", columns=["trace_id", "tokens"])
    ids = traces["trace_id"].tolist()
    traces.loc[traces.index[0], "tokens"] = -1
    traces["added"] = 1
    del traces["trace_id"]
    traces_again = common.load_table("traces", columns=["trace_id", "tokens"])

    st.session_state["seen"] = {
        "again": again.to_dict(orient="list"),
        "again_index": again.index.tolist(),
        # the same data, not a copy of it: a hit costs no copy of a million rows
        "shares_data": bool(np.shares_memory(numbers()["x"].to_numpy(), again["x"].to_numpy())),
        "traces_columns": list(traces_again.columns),
        "traces_ids_kept": traces_again["trace_id"].tolist() == ids,
        "first_tokens": int(traces_again["tokens"].iloc[0]),
    }


def test_a_caller_that_changes_a_shared_frame_leaves_the_cache_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEGIVAL_STORE", str(DEMO))
    first_tokens = int(Store.open(DEMO).read("traces", columns=["tokens"])["tokens"].iloc[0])
    assert first_tokens != -1  # so the check below can fail
    at = AppTest.from_function(_script, default_timeout=60)
    for _ in range(2):  # the second run hits the caches the first one filled and changed
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        seen = at.session_state["seen"]
        assert seen["again"] == {"x": [1.0, 2.0, 3.0], "name": ["a", "b", "c"]}
        assert seen["again_index"] == [0, 1, 2]
        assert seen["shares_data"]
        assert seen["traces_columns"] == ["trace_id", "tokens"]
        assert seen["traces_ids_kept"]
        assert seen["first_tokens"] == first_tokens
