"""The Leaderboard's merged board: the stores given at launch as one rank table (issue 27).

Not a page of its own: ``pages/leaderboard.py`` draws it when its "Merged board" switch is on.
The numbers are :func:`legival_core.views.merged_board.merged_board`'s, the same code a published
site's merged board is made with.
"""

from __future__ import annotations

import streamlit as st

from legival_core.text.safe_text import markdown_literal, visible_bidi
from legival_core.views.board_merge import MergeConflict
from legival_core.views.merged_board import MergedBoard, merged_board, prefer_note
from pages import common

#: ``?board=`` values: the merged board, or the chosen store's own.
MERGED, ONE_STORE = "merged", "store"
_KEY = "merged_board"

#: How many clashing pairs the --prefer note names before it only counts the rest.
PAIRS_NAMED = 5


def chosen() -> bool:
    """The switch "Merged board", bound to ``?board=merged``; shown only when two or more stores
    were given at launch (else False). Off by default, on with ``--merge``. Its value is kept in
    the session (a widget's own state is dropped on a run that does not draw it)."""
    config = common.get_config()
    stores = config.merge_stores()
    if not stores:
        return False
    current = bool(st.session_state.get(_KEY, st.session_state.get(f"_{_KEY}", config.merge)))
    wanted = st.query_params.get("board")
    if wanted is not None and wanted != st.session_state.get(f"_{_KEY}_url"):
        current = wanted == MERGED
    st.session_state[_KEY] = current
    value = st.toggle(
        f"Merged board (all stores given at launch: {markdown_literal(', '.join(stores))})",
        key=_KEY,
        help="One rank table of every store given with --store: the union of their teacher "
        "rows, each saying which store and config it came from. A teacher and dataset that two "
        "stores both hold is refused unless the app was started with --prefer NAME.",
    )
    st.session_state[f"_{_KEY}"] = value
    st.query_params["board"] = MERGED if value else ONE_STORE
    st.session_state[f"_{_KEY}_url"] = st.query_params.get("board")
    return bool(value)


@st.cache_resource(show_spinner=False, max_entries=8)
def _board(
    stores: tuple[tuple[str, str, float], ...],
    prefer: str | None,
    include: bool,
    n_boot: int,
    seed: int,
    low_n: int,
    allow_mixed_graders: bool,
) -> MergedBoard | str:
    """The merged board of ``stores`` ((name, path, manifest mtime): the mtimes key the cache),
    or the one-line message of the clash that refuses it. Shared and read-only."""
    from legival_core.store.store import Store

    opened = {name: Store.open(path) for name, path, _stamp in stores}
    try:
        return merged_board(
            opened,
            prefer,
            include=include,
            n_boot=n_boot,
            seed=seed,
            low_n=low_n,
            allow_mixed_graders=allow_mixed_graders,
        )
    except MergeConflict as error:
        return str(error)


def show(include: bool) -> None:
    """Draw the merged board; a clash ``--prefer`` does not decide shows its message only."""
    from legival_core.store.store import Store, StoreError

    config = common.get_config()
    stores = config.merge_stores()
    for name, path in stores.items():
        try:
            Store.open(path)
        except (StoreError, OSError) as error:
            st.warning(config.store_problem(name, error))
            st.stop()
    made = _board(
        tuple((n, str(p), common.manifest_stamp(p)) for n, p in stores.items()),
        config.prefer,
        include,
        config.rank_resamples,
        config.resample_seed,
        config.low_n_traces,
        config.allow_mixed_graders,
    )
    if isinstance(made, str):
        st.error(markdown_literal(made))
        st.stop()
    st.caption(
        f"The teacher rows of {len(stores)} stores in one table. Each value is averaged over "
        f"the datasets first, with its 95% interval from {config.rank_resamples:,} resamples "
        "of the problems of every store's traces; *store* and *config* say where each teacher's "
        "rows came from (config: the first 12 hex digits of the store's config digest, as a "
        "published site's footer shows it)."
    )
    if config.prefer is not None:
        note = markdown_literal(prefer_note(made.decided, config.prefer, PAIRS_NAMED))
        if made.decided:
            st.info(note)
        else:
            st.caption(note)
    # Names as drawn in a grid cell: bidi controls shown escaped.
    on_screen = made.text.copy()
    if "teacher" in on_screen:
        on_screen["teacher"] = on_screen["teacher"].astype(str).map(visible_bidi)
    st.dataframe(on_screen, hide_index=True, key="merged_board_table")
    if "backtracking" in made.metrics:
        from legival_core.metrics.label_quality import store_quality_note

        manifests = [Store.open(path).manifest for path in stores.values()]
        st.caption(markdown_literal(store_quality_note(manifests)))
    common.download_csv(made.numbers, "merged_leaderboard")
    st.markdown("**Rows on this board** (one per teacher and dataset)")
    common.table(
        made.rows[["teacher", "dataset", "store", "config", *made.metrics]],
        "merged_board_rows",
    )
