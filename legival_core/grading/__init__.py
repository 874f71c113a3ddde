"""Grading: reading the answer a model states and deciding whether it is the gold: a room of
``legival_core``.

What lives here: box extraction for gold and model text (``boxes``), the words the grader
reads (``lexicon``), what a problem asks (``questions``), whether a sentence asserts, denies or
hedges (``polarity``), and the answer layer (``answers``): candidate answers with their spans,
read in the question's frame.

May import: store.

The task families (``legival_core.tasks``) build on this room; nothing here imports them. This
``__init__`` imports nothing: import a module by its full name (``from legival_core.grading
import answers``).
"""

from __future__ import annotations
