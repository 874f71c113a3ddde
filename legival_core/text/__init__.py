"""Text: steps, tokens, embeddings: a room of ``legival_core``.

Raw model output to what the metrics count: reasoning and answer (``reasoning``), steps
(``segment``), token counts (``tokens``), MiniLM embeddings (``embedding``), escaping model
text (``safe_text``) and Thought Anchors chunks carried onto our steps (``chunk_alignment``).
Reading the answer a text states is the ``grading`` room's.

May import: store.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
