"""The embedded default's tokenizer: word level, built locally from the games' text.

No tokenizer can be downloaded here (docs/architecture.md, "The embedded default"), and a
tiny model trained from scratch learns faster over few, meaningful tokens than
over sub-word pieces. So the vocabulary is every word of a corpus (the games'
own prompts and action texts, ``mage_core.rollout.corpus``).

Splitting: whitespace separates words, and every punctuation character (ASCII
punctuation and symbols, Unicode punctuation such as ``_``) is a token of its
own, so ``"(2, 3)"`` is ``( 2 , 3 )``. The response tags
``<action>``, ``</action>``, ``<remark>``, ``</remark>`` are single tokens (added,
not special: decoding with ``skip_special_tokens=True`` keeps them). Decoding
joins tokens with single spaces (``"<action> ( 2 , 3 ) </action>"``), which the
games' parsers accept because they are whitespace tolerant. Newlines and runs
of spaces are not tokens: the layout of a prompt is lost, its words are not.

Ids are deterministic in the corpus: specials first (``<pad>`` 0, ``<unk>`` 1,
``<bos>`` 2, ``<eos>`` 3), then the tags, then the corpus words sorted by code
point, then ``extra_tokens`` in the given order (duplicates dropped). Words not
in the vocabulary encode to ``<unk>``. ``encode`` adds no ``<bos>``/``<eos>``:
the prompt builder decides.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Sequence

from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)
#: Response tags kept whole (docs/method.md section 2: the answer format).
TAG_TOKENS = ("<action>", "</action>", "<remark>", "</remark>")


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("isolated")])


def corpus_words(corpus: Iterable[str]) -> set[str]:
    """Every word of ``corpus`` as the tokenizer splits it (tags and specials excluded)."""
    whole = sorted(SPECIAL_TOKENS + TAG_TOKENS, key=len, reverse=True)
    splitter = re.compile("|".join(re.escape(t) for t in whole))
    pre = _pre_tokenizer()
    words: set[str] = set()
    for i, text in enumerate(corpus):
        if not isinstance(text, str):
            raise ValueError(f"corpus item {i} is {type(text).__name__}, not str")
        for segment in splitter.split(text):
            words.update(piece for piece, _ in pre.pre_tokenize_str(segment))
    return words


def build_tokenizer(corpus: Iterable[str], extra_tokens: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose vocabulary is every word of ``corpus``.

    ``extra_tokens`` are appended as whole vocabulary words (each must be a
    single word: no whitespace). Save and load it with ``save_pretrained`` /
    ``AutoTokenizer.from_pretrained(directory, local_files_only=True)``.
    """
    if isinstance(extra_tokens, str):
        raise ValueError("extra_tokens must be a sequence of strings, not one string")
    for token in extra_tokens:
        if not isinstance(token, str) or not token or token != token.strip() or any(c.isspace() for c in token):
            raise ValueError(f"extra_tokens: {token!r} is not a single non-empty word without whitespace")
    reserved = SPECIAL_TOKENS + TAG_TOKENS
    words = sorted(corpus_words(corpus) - set(reserved))
    vocab: dict[str, int] = {}
    for token in (*reserved, *words, *extra_tokens):
        vocab.setdefault(token, len(vocab))
    if len(vocab) == len(reserved):
        raise ValueError("the corpus holds no words: the tokenizer would only know its special tokens")

    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = _pre_tokenizer()
    # Added tokens are matched before pre-tokenization, so they stay whole.
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in TAG_TOKENS])
    # Extra tokens containing punctuation ("(invalid)") would be split by the
    # pre-tokenizer: match them whole too.
    tokenizer.add_tokens(
        [AddedToken(t, normalized=False, special=False) for t in extra_tokens if _splits(t)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        unk_token=UNK,
        bos_token=BOS,
        eos_token=EOS,
        clean_up_tokenization_spaces=False,  # keep "( 2 , 3 )" exactly as joined
    )


def _splits(token: str) -> bool:
    return len(_pre_tokenizer().pre_tokenize_str(token)) != 1


#: Words a ``word_encoder`` remembers at most (a prompt vocabulary is small; free
#: text could hold any number of distinct words, which are then encoded uncached).
MAX_CACHED_WORDS = 65536


def word_encoder(tokenizer: object) -> Callable[[str], list[int]] | None:
    """A fast ``text -> ids`` equal to ``tokenizer.encode(text, add_special_tokens=False)``
    for a word-level tokenizer that splits on whitespace first (this module's), or None
    for any other tokenizer.

    Such a tokenizer encodes ``" ".join(words)`` as the concatenation of each word's
    ids (whitespace separates pre-tokens, and no added token holds whitespace), so a
    prompt is encoded word by word from a cache: a dict lookup per word instead of a
    call into the tokenizer per prompt. Rollouts encode every decision's prompt, and
    most of their words repeat (issue 12: the tokenizer calls cost a quarter of a
    rollout)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not isinstance(backend.model, models.WordLevel) or backend.normalizer is not None:
        return None
    pre = json.loads(backend.to_str()).get("pre_tokenizer") or {}
    first = pre.get("pretokenizers", [pre])[0] if pre.get("type") == "Sequence" else pre
    if first.get("type") != "WhitespaceSplit":
        return None
    if any(any(c.isspace() for c in t.content) for t in backend.get_added_tokens_decoder().values()):
        return None
    encode = tokenizer.encode  # type: ignore[attr-defined]
    cache: dict[str, list[int]] = {}

    def encode_words(text: str) -> list[int]:
        ids: list[int] = []
        for word in text.split():
            piece = cache.get(word)
            if piece is None:
                piece = encode(word, add_special_tokens=False)
                if len(cache) < MAX_CACHED_WORDS:
                    cache[word] = piece
            ids += piece
        return ids

    return encode_words
