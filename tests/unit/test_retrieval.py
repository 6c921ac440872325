"""The memory baselines' retrieval (A-MEM notes, Memento cases) and how the
baselines shape meta-episodes: hand-checked rankings, link expansion, a bank
shared across meta-episodes, Reflexion reflecting only after failures."""

from __future__ import annotations

import pytest

from mage_core.config import parse_config
from mage_core.rollout.meta_episode import MetaSettings
from mage_core.rollout.retrieval import MemoryBank, terms
from mage_core.trainers.meta_rl import meta_settings
from tests.envcases import Case
from tests.unit.test_meta_episode import build, play

pytestmark = pytest.mark.unit


def test_bm25_ranks_the_note_sharing_the_rare_term_first() -> None:
    bank = MemoryBank("notes", k=1)
    for text in ("opponent bets with king", "opponent folds to a bet", "opponent checks with jack"):
        bank.add_note(text)
    # "jack" is in one note only; "opponent" in all three carries no weight
    assert bank.recall("what does the opponent do with a jack")[0] == "opponent checks with jack"
    assert terms("Lemon, 6-count!") == ["lemon", "6", "count"]


def test_a_new_note_links_to_its_two_most_similar_notes_and_recall_follows_links() -> None:
    bank = MemoryBank("notes", k=1)
    for text in ("red shirt large", "blue mug small", "red shirt small cotton"):
        bank.add_note(text)
        bank.commit()  # one note per batch: each links to every earlier note it can
    assert bank.entries[1].links == [0]  # the only earlier note
    assert bank.entries[2].links == [0, 1]  # red shirt, then small
    # k = 1: the best note, then its links; at most 2k = 2 notes in all
    assert bank.recall("cotton") == ["red shirt small cotton", "red shirt large"]
    assert MemoryBank("notes", k=3).recall("anything") == []


def test_notes_of_one_batch_link_to_earlier_batches_not_to_each_other() -> None:
    bank = MemoryBank("notes", k=2)
    bank.add_note("red shirt large")
    assert bank.recall("shirt") == ["red shirt large"]  # the recall commits the first batch
    bank.add_note("red shirt small")  # two episodes that ended on the same turn
    bank.add_note("red shirt cotton")
    assert len(bank) == 3 and len(bank.entries) == 1  # written, not yet retrievable
    bank.commit()
    assert [e.links for e in bank.entries] == [[], [0], [0]]


def test_top_k_matches_a_full_sort_of_rank_bm25_scores_with_ties_to_the_newest() -> None:
    # an independent BM25+ (rank_bm25, the formula with the same k1, b and delta) fully
    # sorted, against the bank's linear top-k, on a corpus with many exact duplicates
    import random

    import numpy as np
    from rank_bm25 import BM25Plus

    rng = random.Random(0)
    words = ["king", "queen", "jack", "bet", "pass", "fold", "call"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(300)]
    bank = MemoryBank("cases", k=5)
    bank.add_cases([(t, "a") for t in texts], "failure")
    bank.commit()
    reference = BM25Plus([terms(t) for t in texts], k1=1.5, b=0.75, delta=1.0)
    for query in ["king bet", "fold", "queen queen call", "nothing known"]:
        scores = np.asarray(reference.get_scores(terms(query)))
        expected = sorted(range(len(texts)), key=lambda i: (-round(scores[i], 9), -i))[:5]
        assert bank._top(query, 5) == expected, query


def test_cases_keep_state_action_and_outcome_and_ties_go_to_the_newest() -> None:
    bank = MemoryBank("cases", k=2)
    bank.add_cases([("board x o", "(1, 1)"), ("board x x", "(2, 2)")], "failure")
    bank.add_cases([("board x o", "(3, 3)")], "success")
    assert len(bank) == 3
    # two cases share the state "board x o" exactly: the newer (success) first
    assert bank.recall("board x o") == ["board x o -> (3, 3) -> success", "board x o -> (1, 1) -> failure"]
    with pytest.raises(ValueError, match="memory kind"):
        MemoryBank("episodes", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retrieve_k"):
        MemoryBank("cases", 0)


def baseline_settings(preset: str, **overrides) -> MetaSettings:
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "algorithm": {"preset": preset}, "tournament": {"matches": []}})
    base = meta_settings(cfg, "kuhn_poker", 3, cfg.algorithm.reflect)
    return MetaSettings(**{**base.__dict__, "restart": "same", **overrides})


def test_each_baseline_remembers_what_its_paper_says() -> None:
    react, reflexion = baseline_settings("react"), baseline_settings("reflexion")
    a_mem, memento = baseline_settings("a_mem"), baseline_settings("memento")
    assert (react.memory, react.retrieval, react.reflect) == ("none", "none", False)
    assert (reflexion.memory, reflexion.retrieval, reflexion.reflect_on) == ("reflection_only", "none", "failure")
    assert (a_mem.retrieval, memento.retrieval) == ("notes", "cases")
    # compact style: a structured summary stands in for a generated text; paper style generates
    assert reflexion.reflections == "summary"
    paper = parse_config({"algorithm": {"preset": "reflexion"}, "policy": {"prompt_style": "paper",
                                                                           "action_mode": "free"},
                          "tournament": {"matches": []}})
    assert meta_settings(paper, "kuhn_poker", 3, True).reflections == "generated"


def test_memento_recalls_cases_of_an_earlier_meta_episode_through_a_shared_bank() -> None:
    s = baseline_settings("memento")
    bank = MemoryBank("cases", k=2)
    first = build(Case("kuhn_poker", "aggressive", 1), s, seed=3)
    first.bank = bank
    play(first, lambda texts: texts.index("PASS"))
    assert len(bank) == 3  # one PASS per hand, three hands
    second = build(Case("kuhn_poker", "aggressive", 1), s, seed=3)
    second.bank = bank
    prompt = second.request().prompt
    card = prompt.split()[-2]
    # the same deal: the recalled cases are the first meta-episode's, in the compact words
    assert prompt.startswith(f"kuhn second mem {card} opBET -> mePASS -> failure mem {card} opBET -> mePASS -> failure")
    assert prompt.endswith(f"ep1 {card} opBET")


def test_a_missing_bank_is_an_error_not_an_empty_memory() -> None:
    meta = build(Case("kuhn_poker", "aggressive", 1), baseline_settings("a_mem"), seed=0)
    with pytest.raises(RuntimeError, match="no memory bank"):
        meta.request()


def _phases(meta, action: str) -> list[str]:
    from mage_core.rollout.meta_episode import Response

    phases = []
    while not meta.done:
        request = meta.request()
        phases.append(request.phase)
        text = "<remark>call with the king</remark>" if request.phase == "reflect" else f"<action>{action}</action>"
        meta.apply(request, Response(text, -0.5, token_ids=[1]))
    return phases


def test_reflexion_reflects_only_after_a_failed_attempt() -> None:
    s = baseline_settings("reflexion", style="paper", action_mode="free", reflections="generated")
    # Kuhn vs aggressive (always bets) as second player, the same deal each hand: PASS folds,
    # a loss; BET calls and wins with the king
    folds = build(Case("kuhn_poker", "aggressive", 1), s, seed=3)
    assert _phases(folds, "PASS") == ["play", "reflect", "play", "reflect", "play"]
    assert [m.success for m in folds.context.memory] == [False, False, False]
    seed = next(i for i in range(50) if "Your card: K" in build(Case("kuhn_poker", "aggressive", 1), s, i).request().prompt)
    wins = build(Case("kuhn_poker", "aggressive", 1), s, seed)
    assert _phases(wins, "BET") == ["play", "play", "play"]  # three wins: nothing to reflect on
    assert [m.success for m in wins.context.memory] == [True, True, True]
