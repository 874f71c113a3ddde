"""Grading: reading the answer a model states and deciding whether it is the gold: a room of
``legival_core``.

What lives here: the grader and its version (``grader``); the answer layer (``answers``):
candidate answers with their spans, found by registered finders and read in the question's
frame; the kinds of candidate and how each is graded (``candidates``); why a candidate is not
the answer, as one ordered list of named rules (``rules``); one sentence read once
(``sentences``); what a problem asks and how a statement answers it (``questions``); what the
prompt gives and asks about (``frames``); whether a sentence asserts, denies or hedges
(``polarity``); linear scanners of maths, sentences and lists (``scanning``); box extraction for
gold and model text (``boxes``); the words the grader reads (``lexicon``).

May import: store.

The task families (``legival_core.tasks``) build on this room; nothing here imports them. This
``__init__`` imports nothing: import a module by its full name (``from legival_core.grading
import answers``).
"""

from __future__ import annotations
