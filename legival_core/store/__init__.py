"""Storage: a room of ``legival_core``.

The results store and what it rests on: the tables and their key columns (``schema``), the store
(``store``, the one door) and the modules it is made of (``file_safety``, ``layout``, ``parts``,
``frames``, ``manifest``, ``quarantine_file``, ``verify``, ``export``, ``errors``), the frames a
stage keeps in scratch files until it needs them (``spilled_frames``), who made what
(``provenance``), the offline assets (``assets``, also ``python -m legival_core.store.assets``)
and safe CSV/TeX cells (``safe_export``). What the app, the published site and the pages keep in
or about a store lives with them: the app's settings (:mod:`legival_core.views.app_config`), a
site's pins (:mod:`legival_core.views.site_pin`), the pages' stored results
(:mod:`legival_core.metrics.page_results`; only their table's schema is here).

May import: no other room.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
