"""Text the embedded tokenizer is built from: the games' own prompts.

Random meta-episodes of the game a run plays (``corpus_games``), rendered through the
real prompt code in the requested style and every memory mode, plus every action text,
the task's own words (``TaskData.texts``) and the response tags. So a word-level
tokenizer built from this corpus covers every word a prompt or a legal action of that
game can contain, and nothing of the others: a run's vocabulary does not change when
another environment's code or data does.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from mage_core.config import Config
from mage_core.envs.registry import is_single_agent, make_env, task
from mage_core.opponents.population import Population
from mage_core.opponents.registry import make_opponent
from mage_core.rollout.meta_episode import (
    MetaEpisode,
    MetaEpisodeSpec,
    MetaSettings,
    Response,
)

MEMORY_MODES = ("history_only", "reflection_only", "history_and_reflection")
TAGS = ("<action>", "</action>", "<remark>", "</remark>", "(invalid)")


def _settings(cfg: Config, game: str, style: str, memory: str) -> MetaSettings:
    env_cfg = getattr(cfg.env, game)
    return MetaSettings(
        num_episodes=3, reflect=True, restart="fresh", early_stop=False, style=style,  # type: ignore[arg-type]
        memory=memory, reflections="summary", action_mode="constrained",  # type: ignore[arg-type]
        max_remark_chars=cfg.policy.max_remark_chars,
        moves_per_turn=cfg.env.sokoban.moves_per_turn, invalid_penalty=env_cfg.invalid_action_penalty,
        length_penalty_coef=env_cfg.length_penalty_coef, max_response_tokens=env_cfg.max_response_tokens,
    )


def corpus_games(cfg: Config) -> tuple[str, ...]:
    """The games a run's tokenizer covers: the one it plays (``env.name``), so its vocabulary,
    and with it its figures, depend on no other environment's code or data."""
    return (cfg.env.name,)


def task_texts(cfg: Config, game: str) -> Iterator[str]:
    """A data-backed task's own words (``TaskData.texts``: random play reaches few of its
    pages or games); nothing for the others."""
    data = task(game).data
    if data is not None:
        yield from data.texts(cfg)


def game_corpus(cfg: Config, style: str, meta_episodes_per_game: int = 40, seed: int = 0) -> Iterator[str]:
    """Prompts, action texts and final states of random play, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    settings = cfg.opponents.settings()
    yield " ".join(TAGS)
    yield "mem -> success failure"  # the memory baselines' compact words: a task's vocabulary, whatever the method
    for game in corpus_games(cfg):
        yield from task_texts(cfg, game)
        env_settings = getattr(cfg.env, game)
        if is_single_agent(game):
            pairs = [(None, 0)]
        else:
            pairs = sorted(Population(cfg.population.entries(game)).probabilities())  # type: ignore[arg-type]
        data = task(game).data
        cap = data.corpus_meta_episodes if data is not None else None  # a slow reset: fewer
        for i in range(meta_episodes_per_game if cap is None else min(meta_episodes_per_game, cap)):
            opponent_name, seat = pairs[i % len(pairs)]
            memory = MEMORY_MODES[i % len(MEMORY_MODES)]
            opponent = make_opponent(game, opponent_name, settings) if opponent_name else None
            seed_i = int(rng.integers(2**31))
            env = make_env(game, env_settings, np.random.default_rng(seed_i), opponent, seat)
            spec = MetaEpisodeSpec(game, opponent_name, seat, seed_i, i)
            meta = MetaEpisode(spec, env, _settings(cfg, game, style, memory), encode=lambda t: [],
                               encode_action=lambda t: [])
            while not meta.done:
                request = meta.request()
                yield request.prompt
                texts = request.candidate_texts or []
                yield " ".join(texts)
                choice = int(rng.integers(len(texts)))
                meta.apply(request, Response(texts[choice], 0.0, choice=choice))
            yield meta.env.observation()


def action_tokens(cfg: Config, seed: int = 0) -> list[str]:
    """Every action of every game as a compact-style word (sorted), for the
    tokenizer's ``extra_tokens``, so that each stays one token. The agent's first
    turn offers them all: Tic-Tac-Toe's nine cells moving first, Kuhn's PASS and
    BET, Sokoban's every move sequence (its legal actions do not depend on
    the state) and WebShop's page words (``compact_action_words``)."""
    words: set[str] = set()
    for game in corpus_games(cfg):
        opponent = make_opponent(game, "random", cfg.opponents.settings()) if not is_single_agent(game) else None
        env = make_env(game, getattr(cfg.env, game), np.random.default_rng(seed), opponent, 0)
        env.reset()
        words.update(env.compact_action(a) for a in env.legal_actions())
        more = task(game).action_words
        if more is not None:  # what later states admit beyond the first (WebShop's pages, ALFWorld's c1..cN)
            words.update(more(env))
    # an action of several words (ALFWorld's commands as candidates) is read word by word, as the prompt is
    return sorted(w for w in words if not any(c.isspace() for c in w))
