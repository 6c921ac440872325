"""WebShop's search engine: BM25 over each product's indexed text.

The official engine is Lucene (pyserini) over title + description + first bullet
+ options, lower-cased, returning the top 50 hits, 10 a page. Here the same text
is ranked by ``rank_bm25``'s Okapi BM25 with Lucene's default parameters
(k1 = 0.9, b = 0.4); tokens are lower-case letter/digit runs without English stop
words (Lucene's English analyzer also stems: "shirts" does not find "shirt" here).
Only products that share a token with the query are returned (as Lucene), best
first, ties in catalogue order.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

#: Hits a search returns (official SEARCH_RETURN_N).
TOP_N = 50
_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there
    these they this to was will with i am looking need want""".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case letter/digit runs, stop words removed."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP]


class SearchEngine:
    """BM25 over documents (one text per product, in catalogue order)."""

    def __init__(self, documents: Sequence[str], k1: float = 0.9, b: float = 0.4) -> None:
        from rank_bm25 import BM25Okapi  # a core dependency

        if not documents:
            raise ValueError("SearchEngine needs at least one document")
        self._tokens = [tokenize(d) for d in documents]
        self._bm25 = BM25Okapi(self._tokens, k1=k1, b=b)

    def search(self, query: str, top_n: int = TOP_N) -> list[int]:
        """Indices of the best ``top_n`` documents sharing a token with ``query``."""
        words = tokenize(query)
        if not words:
            return []
        scores = self._bm25.get_scores(words)
        wanted = set(words)
        matching = np.array([bool(wanted.intersection(doc)) for doc in self._tokens])
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [int(i) for i in order if matching[i]][:top_n]
