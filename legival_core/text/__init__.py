"""Text: steps, tokens, embeddings: a room of ``legival_core``.

Raw model output to what the metrics count: reasoning and answer (``reasoning``), steps
(``segment``), token counts (``tokens``), MiniLM embeddings (``embedding``), escaping model
text (``safe_text``) and Thought Anchors chunks carried onto our steps (``chunk_alignment``).
Reading the answer a text states is the ``grading`` room's.

May import: store.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.text import reasoning``), so importing one module never loads its neighbours.
"""

from __future__ import annotations
