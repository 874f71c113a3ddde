"""No helper module of ``pages/`` is ever offered as a page (issue 41).

Until some run of the app has called ``st.navigation``, Streamlit takes the ``pages/`` folder
beside ``app.py`` for an old-style automatic multipage app and sends a menu of every file in
it: for the first seconds after the server started, the sidebar listed "app" and "common"
(the main script and a helper module) beside files named like the real pages. The folder
keeps its name; the server now starts with the menu hidden (``.streamlit/config.toml`` beside
``app.py``) and ``app.py`` switches it on after its own ``st.navigation`` has run.

The test talks to a real server as a browser tab does, over its WebSocket, and records every
menu the server sends to the tab, from the first message on: a fresh server per case, since
the old mode ends for the whole process once any run has called ``st.navigation``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.browser_fixtures import streamlit_app

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
#: The names Streamlit's automatic mode gives the files: the main script and every module of
#: pages/ (underscores as spaces), helpers included.
FILE_NAMES = {"app"} | {p.stem.replace("_", " ") for p in (REPO / "pages").glob("*.py")}


async def _menus(base: str, page: str, seconds: float = 240) -> list[tuple[bool, list[str]]]:
    """Connect to the app at ``base`` asking for ``page`` ("" for the root address); return
    each list of pages the server sent, with whether the tab would show it, until the app's
    own menu has been shown and its run has finished."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.proto.Navigation_pb2 import Navigation

    url = base.replace("http://", "ws://") + "/_stcore/stream"
    menus: list[tuple[bool, list[str]]] = []
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=None) as socket:
        start = BackMsg()
        start.rerun_script.page_name = page
        await socket.send(start.SerializeToString())
        hidden = False  # the session's "hide the menu" switch, sent at each run's start
        shown_own = False
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                data = await asyncio.wait_for(socket.recv(), timeout=1)
            except TimeoutError:
                continue
            message = ForwardMsg()
            message.ParseFromString(data)
            kind = message.WhichOneof("type")
            if kind == "new_session":
                hidden = message.new_session.config.hide_sidebar_nav
                names = [p.page_name for p in message.new_session.app_pages]
                if len(names) > 1:  # one page has no menu
                    menus.append((not hidden, names))
            elif kind == "navigation":
                navigation = message.navigation
                names = [p.page_name for p in navigation.app_pages if not p.is_hidden]
                visible = navigation.position != Navigation.Position.HIDDEN and not hidden
                menus.append((visible, names))
                shown_own = shown_own or (visible and "Leaderboard" in names)
            elif kind == "script_finished" and shown_own:
                return menus
    raise AssertionError(f"the app's own menu never came: {menus}")


@pytest.mark.parametrize("page", ["", "transfer"], ids=["root address", "a page's address"])
def test_the_first_visitor_never_sees_the_files_of_pages_as_pages(page: str) -> None:
    with streamlit_app([]) as base:
        menus = asyncio.run(_menus(base, page))
    shown = [names for visible, names in menus if visible]
    assert shown, menus
    leaked = sorted({name for names in shown for name in names} & FILE_NAMES)
    assert leaked == [], f"shown as pages: {leaked} ({menus})"
    assert "Leaderboard" in shown[-1] and "Transfer curves" in shown[-1]
