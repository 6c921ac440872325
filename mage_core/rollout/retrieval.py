"""Retrieval memories of the memory-based baselines (docs/method.md section 9): A-MEM's
notes and Memento's cases, ranked by BM25+ (``bm25s``).

Both are evaluation-only agents around a fixed model: nothing here changes a
weight. What each keeps, written from its paper's description:

- A-MEM (Xu et al. 2025, "agentic memory"): after every episode a *note*: the
  text the agent wrote about it (a generated reflection, or the structured
  summary of the compact style), its keywords (the note's own BM25 terms; the
  paper has the LLM write keywords and tags, which a small constrained model
  cannot), and *links* to the ``LINKS`` most similar notes of earlier batches
  (below). A prompt
  gets the ``k`` notes most similar to the current observation, each followed by
  the notes it links to (A-MEM's link expansion), at most ``2 k`` in all.
- Memento (Zhou et al. 2025, case-based reasoning without fine-tuning): after
  every episode one *case* per play turn: (state, action, the episode's
  outcome). A prompt gets the ``k`` cases whose states are most similar to the
  current observation, successes and failures alike (its non-parametric
  retrieval; the paper's learned Q-function retrieval is not built).

One bank serves every meta-episode of a rollout call (an evaluation suite, a
selection set): it starts empty and grows as episodes end, so later
meta-episodes recall the experience of earlier ones, as the methods' memories
grow across tasks. Meta-episodes advance in lockstep batches and write in a
fixed order, so a suite's figures are the same on every run; the bank lives in
the rollout's process (``rollout.workers`` must be 0 for these agents).

Writes between two retrievals form one *batch*: in a rollout, the episodes that
end on the same lockstep turn, which run side by side. A batch is committed at
the next retrieval (or ``commit()``): its notes link to notes of earlier
batches, not to each other, and the index is rebuilt once per batch rather than
once per note (per-note rebuilds made a suite's cost quadratic in its notes).
Scoring is ``bm25s``'s sparse BM25+, linear in the postings of the query's
terms; ``rank_bm25`` scored every entry in a Python loop, 70 times slower on a
20,000-entry bank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Kind = Literal["notes", "cases"]
#: Links a new A-MEM note makes to the most similar earlier notes.
LINKS = 2
_TOKEN = re.compile(r"[a-z0-9]+")


def terms(text: str) -> list[str]:
    """BM25 terms: lower-case letter and digit runs."""
    return _TOKEN.findall(text.lower())


@dataclass
class Entry:
    text: str  # what a prompt shows
    key: list[str]  # the terms it is retrieved by
    links: list[int] = field(default_factory=list)  # A-MEM: indices of linked notes


class MemoryBank:
    """A growing list of notes or cases with BM25+ retrieval."""

    def __init__(self, kind: Kind, k: int) -> None:
        if kind not in ("notes", "cases"):
            raise ValueError(f"memory kind must be notes or cases, got {kind!r}")
        if k < 1:
            raise ValueError(f"retrieve_k must be >= 1, got {k}")
        self.kind, self.k = kind, k
        self.entries: list[Entry] = []  # committed: what retrieval sees
        self._pending: list[Entry] = []  # this batch's writes
        self._index = None  # BM25+ over ``entries``
        self._indexed = 0

    def __len__(self) -> int:
        return len(self.entries) + len(self._pending)

    def _scores(self, query: str) -> np.ndarray:
        """BM25+ score of every committed entry for ``query``."""
        import bm25s

        if self._indexed != len(self.entries):
            # BM25+ (Lv and Zhai 2011): Okapi's IDF is zero or negative for a term in half or
            # more of the entries, which with the few entries of a young bank ranks nothing.
            # delta 1 is BM25+'s published value; float64 keeps ties exact. A term-less entry
            # still needs a document: BM25 divides by the mean length.
            index = bm25s.BM25(method="bm25+", k1=1.5, b=0.75, delta=1.0, dtype="float64")
            index.index([e.key or ["_"] for e in self.entries], show_progress=False)
            self._index, self._indexed = index, len(self.entries)
        words = terms(query)
        known = [w for w in words if w in self._index.vocab_dict]  # type: ignore[union-attr]
        if not known:  # bm25s needs a non-empty query
            return np.zeros(len(self.entries))
        return np.asarray(self._index.get_scores(known), dtype=np.float64)  # type: ignore[union-attr]

    def _top(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best committed entries for ``query``, best first; equal
        scores go to the newest (recency). Linear in the bank: no full sort."""
        n = len(self.entries)
        if n == 0:
            return []
        scores = self._scores(query)
        k = min(k, n)
        kth = np.partition(scores, n - k)[n - k]  # the k-th best score
        above = np.flatnonzero(scores > kth)
        above = above[np.lexsort((-above, -scores[above]))]
        tied = np.flatnonzero(scores == kth)[::-1][: k - len(above)]  # newest first
        return [int(i) for i in np.concatenate([above, tied])]

    def commit(self) -> None:
        """Make this batch's writes retrievable; its notes link to the ``LINKS`` most
        similar notes of earlier batches (one index for the whole batch)."""
        if not self._pending:
            return
        if self.kind == "notes":
            for entry in self._pending:
                entry.links = self._top(" ".join(entry.key), LINKS)
        self.entries.extend(self._pending)
        self._pending = []

    def add_note(self, text: str) -> None:
        """A-MEM: a note, linked when its batch is committed."""
        self._pending.append(Entry(text, terms(text)))

    def add_cases(self, turns: list[tuple[str, str]], outcome: str) -> None:
        """Memento: one case per (state, action) of a finished episode."""
        for state, action in turns:
            self._pending.append(Entry(f"{state} -> {action} -> {outcome}", terms(state)))

    def recall(self, observation: str) -> list[str]:
        """What a prompt shows for ``observation``: the ``k`` most similar entries,
        notes followed by their linked notes (each entry once, at most ``2 k``).
        Commits the batch written since the last recall first."""
        self.commit()
        picked: list[int] = []
        for i in self._top(observation, self.k):
            for j in [i, *self.entries[i].links] if self.kind == "notes" else [i]:
                if j not in picked:
                    picked.append(j)
        return [self.entries[i].text for i in picked[: 2 * self.k]]
