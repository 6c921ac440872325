"""Text the embedded tokenizer is built from: the games' own prompts.

Random meta-episodes of every game, rendered through the real prompt code in
the requested style and every memory mode, plus every action text and the
response tags. So a word-level tokenizer built from this corpus covers every
word a prompt or a legal action can contain.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from mage_core.config import Config
from mage_core.envs.registry import is_single_agent, make_env
from mage_core.opponents.population import Population
from mage_core.opponents.registry import make_opponent
from mage_core.rollout.meta_episode import (
    MetaEpisode,
    MetaEpisodeSpec,
    MetaSettings,
    Response,
)

#: Games every embedded tokenizer covers (a run's own task is added: ``corpus_games``).
GAMES = ("tic_tac_toe", "kuhn_poker", "sokoban")
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
    """The games a run's tokenizer covers: ``GAMES``, and the run's own task when it
    is a data-backed one (WebShop reads its catalogue; other runs' vocabularies do
    not depend on whether that data is on disk)."""
    return GAMES if cfg.env.name in GAMES else (*GAMES, cfg.env.name)


#: Data-backed tasks whose reset is slow (ALFWorld: ~1 s, fast-downward translates the
#: problem): random play covers their prompt shapes in fewer meta-episodes; their words
#: come from ``task_texts``.
SLOW_RESET = {"alfworld": 1}
#: ALFWorld's compact command names offered at most (c1..cN; the admissible lists seen run to ~60).
ALFWORLD_COMMANDS = 120


def task_texts(cfg: Config, game: str) -> Iterator[str]:
    """A data-backed task's own words: every product and goal of the WebShop
    catalogue as its compact prompt shows them (random play reaches few pages);
    ALFWorld's grammar (every feedback sentence) and each game's goal text and
    object names, read from the game files without playing them."""
    if game == "alfworld":
        import json
        import re

        from mage_core.envs.alfworld.env import SPLIT_FOLDERS, split_games

        words: set[str] = set()
        for split in SPLIT_FOLDERS:
            try:
                files = split_games(cfg.env.alfworld.data_path, split)
            except ValueError:
                continue  # a split without games: check_task_data reports it when a stage needs it
            for gamefile in files:
                with open(gamefile) as handle:
                    data = json.load(handle)
                words.update(re.findall(r"[a-z]+", data["grammar"].lower()))
                words.update(re.findall(r"[a-z]+", data["pddl_problem"].lower()))  # object and type names
        yield " ".join(sorted(words))
        yield " ".join(str(i) for i in range(1, 61))
        return
    if game != "webshop":
        return
    from mage_core.envs.webshop.env import compact_goal, load_shop

    w = cfg.env.webshop
    catalogue, _ = load_shop(w.data_path, w.load_seed, w.skip_unknown_goals)
    for p in catalogue.products:
        yield " ".join([p.name.lower(), p.price_text, p.description.lower(), " ".join(p.bullets).lower(),
                        *(v for values in p.options.values() for v in values)])
    for g in catalogue.goals:
        yield compact_goal(g.instruction)


def game_corpus(cfg: Config, style: str, meta_episodes_per_game: int = 40, seed: int = 0) -> Iterator[str]:
    """Prompts, action texts and final states of random play, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    settings = cfg.opponents.settings()
    yield " ".join(TAGS)
    if cfg.algorithm.agent in ("a_mem", "memento"):  # their compact prompts' own words (other runs': unchanged)
        yield "mem -> success failure"
    for game in corpus_games(cfg):
        yield from task_texts(cfg, game)
        env_settings = getattr(cfg.env, game).settings()
        if is_single_agent(game):
            pairs = [(None, 0)]
        else:
            pairs = sorted(Population(cfg.population.entries(game)).probabilities())  # type: ignore[arg-type]
        for i in range(min(meta_episodes_per_game, SLOW_RESET.get(game, meta_episodes_per_game))):
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
        env = make_env(game, getattr(cfg.env, game).settings(), np.random.default_rng(seed), opponent, 0)
        env.reset()
        words.update(env.compact_action(a) for a in env.legal_actions())
        if game == "webshop":  # its first page offers only "search": every page's words
            from mage_core.envs.webshop.env import compact_action_words

            words.update(compact_action_words(env.catalogue))  # type: ignore[attr-defined]
        if game == "alfworld":  # later states admit more commands than the first
            words.update(f"c{i}" for i in range(1, ALFWORLD_COMMANDS + 1))
    return sorted(words)
