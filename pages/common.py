"""Streamlit glue shared by the pages: the configured stores, cached reads, URL-bound widgets.

Everything a person would share (store, dataset, teacher, student, metric, trace) is kept in
``st.query_params`` so a copied URL reopens the same view. Values coming from a URL are checked
against the options on screen; an unknown value gives a short message, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from legival_core.app_config import AppConfig, parse_app_args

_CONFIG_KEY = "_legival_config"


def set_config(config: AppConfig) -> None:
    st.session_state[_CONFIG_KEY] = config


def get_config() -> AppConfig:
    config = st.session_state.get(_CONFIG_KEY)
    if config is None:  # a page run on its own (tests): bundled stores only
        import os

        config = parse_app_args([], os.environ)
        set_config(config)
    return config


def store_chooser() -> None:
    """Sidebar selector of the configured stores, bound to ``?store=``."""
    config = get_config()
    names = list(config.stores)
    requested = st.query_params.get("store")
    name, message = config.resolve(requested)
    if message:
        st.sidebar.info(message)
    chosen = st.sidebar.selectbox(
        "Results store", names, index=names.index(name), key="store_select",
        help="The bundled demo, the papers' published numbers, or a store given at launch.",
    )
    if chosen != config.default or "store" in st.query_params:
        st.query_params["store"] = chosen
    st.session_state["store_name"] = chosen
    if config.readonly:
        st.sidebar.caption("Read-only mode: nothing is written to disk.")


def current_store_name() -> str:
    config = get_config()
    name = st.session_state.get("store_name")
    if name not in config.stores:
        name, _ = config.resolve(st.query_params.get("store"))
    return name


def current_store_path() -> Path:
    return get_config().stores[current_store_name()]


def _manifest_stamp(path: Path) -> float:
    manifest = path / "manifest.json"
    return manifest.stat().st_mtime if manifest.exists() else 0.0


@st.cache_data(show_spinner=False, max_entries=64)
def _read_table(path: str, stamp: float, table: str, columns: tuple[str, ...] | None) -> pd.DataFrame:
    from legival_core.store import Store

    store = Store.open(path)
    if not store.has(table):
        return pd.DataFrame()
    return store.read(table, columns=list(columns) if columns else None)


def load_table(table: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A table of the current store (cached until the store's manifest changes)."""
    path = current_store_path()
    return _read_table(str(path), _manifest_stamp(path), table, tuple(columns) if columns else None)


@st.cache_data(show_spinner=False, max_entries=8)
def _read_manifest(path: str, stamp: float) -> dict[str, Any]:
    from legival_core.store import Store

    return dict(Store.open(path).manifest)


def load_manifest() -> dict[str, Any]:
    path = current_store_path()
    return _read_manifest(str(path), _manifest_stamp(path))


def store_or_stop() -> None:
    """Stop the page with a friendly message when the current store cannot be opened."""
    from legival_core.store import Store, StoreError

    path = current_store_path()
    try:
        Store.open(path)
    except (StoreError, OSError) as error:
        st.warning(f"The store '{current_store_name()}' cannot be opened: {error}")
        st.stop()


def url_select(
    label: str, options: Sequence[Any], param: str, *, default: Any = None,
    sidebar: bool = False, help: str | None = None, format_func: Any = str,
) -> Any:
    """A selectbox whose value lives in ``?param=``; unknown URL values fall back politely."""
    options = list(options)
    if not options:
        return None
    where = st.sidebar if sidebar else st
    wanted = st.query_params.get(param)
    index = options.index(default) if default in options else 0
    if wanted is not None:
        as_text = [str(o) for o in options]
        if wanted in as_text:
            index = as_text.index(wanted)
        else:
            shown = wanted if len(wanted) <= 40 else wanted[:37] + "..."
            where.info(f"{label}: {shown!r} is not available here; showing {options[index]!s}.")
    value = where.selectbox(
        label, options, index=index, key=f"qp_{param}", help=help, format_func=format_func
    )
    st.query_params[param] = str(value)
    return value


def download_csv(frame: pd.DataFrame, name: str, label: str = "Download CSV") -> None:
    """Every table has a CSV export."""
    st.download_button(
        label, frame.to_csv(index=False).encode(), file_name=f"{name}.csv", mime="text/csv",
        key=f"csv_{name}", on_click="ignore",
    )
