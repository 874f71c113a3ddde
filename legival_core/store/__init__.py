"""Storage and configuration: a room of ``legival_core``.

The results store and what it rests on: the tables and their key columns (``schema``), the store
(``store``, the one door) and the modules it is made of (``file_safety``, ``layout``, ``parts``,
``frames``, ``manifest``, ``quarantine_file``, ``verify``, ``export``, ``errors``), who made what
(``provenance``), which stores the app may open (``app_config``), the offline assets
(``assets``, also ``python -m legival_core.store.assets``), safe CSV/TeX cells (``safe_export``),
the digests a published site is pinned to (``site_pin``) and the pages' stored default results
(``page_results``).

May import: no other room. Beyond that: ``app_config`` imports ``legival_core.text.safe_text``
(a store's name is escaped for Markdown with the one escaping helper).

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.store import schema``), so importing one module never loads its neighbours.
"""

from __future__ import annotations
