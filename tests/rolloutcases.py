"""A tiny policy and trainer for rollout tests, in both action modes.

``constrained``: Tic-Tac-Toe, compact prompts, the policy chooses among the legal
actions. ``free``: Kuhn Poker, paper prompts, sampled text parsed from <action>
tags and generated reflections (the paper's way), a short token budget and at
most two turns per hand (an untrained policy writes no valid action).
The model is the embedded tiny Qwen3 with a tokenizer from a small game corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mage_core.backends.hf import HFGenerator
from mage_core.config import Config, parse_config
from mage_core.policy.model import TinyModelSpec, build_tiny_qwen3
from mage_core.policy.tokenizer import build_tokenizer
from mage_core.rollout.corpus import action_tokens, game_corpus
from mage_core.rollout.meta_episode import MetaEpisode
from mage_core.stages.train import make_codec
from mage_core.trainers.meta_rl import MetaRLTrainer

PARAMS = {
    "constrained": {"env": {"name": "tic_tac_toe"}},
    "free": {
        "env": {"name": "kuhn_poker", "kuhn_poker": {"max_turns": 2}},  # an untrained policy's text is invalid
        "policy": {"action_mode": "free", "prompt_style": "paper", "reflections": "generated",
                   "memory": "history_and_reflection", "max_new_tokens": 6},
    },
}
COMMON = {"train": {"groups_per_iteration": 2}, "algorithm": {"group_size": 4},
          "evaluation": {"meta_episodes_per_opponent_seat": 2}, "tournament": {"matches": []}}


@dataclass
class Policy:
    cfg: Config
    tokenizer: Any
    model: torch.nn.Module
    codec: Any

    def trainer(self, **rollout: Any) -> MetaRLTrainer:
        """A trainer on a copy of the model (evaluation only: no engine)."""
        cfg = self.cfg.model_copy(update={"rollout": self.cfg.rollout.model_copy(update=rollout)})
        model = build_tiny_qwen3(_spec(cfg), len(self.tokenizer), self.tokenizer.pad_token_id,
                                 self.tokenizer.bos_token_id, self.tokenizer.eos_token_id, seed=0)
        model.load_state_dict(self.model.state_dict())
        return MetaRLTrainer(cfg, None, HFGenerator(model, pad_token_id=self.tokenizer.pad_token_id), self.codec)


def _spec(cfg: Config) -> TinyModelSpec:
    m = cfg.model
    return TinyModelSpec(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                         num_kv_heads=m.num_kv_heads, head_dim=m.head_dim, intermediate_size=m.intermediate_size,
                         max_position_embeddings=m.max_position_embeddings)


def tiny_policy(mode: str, seed: int = 0) -> Policy:
    cfg = parse_config({**COMMON, **PARAMS[mode]})
    tokenizer = build_tokenizer(game_corpus(cfg, cfg.policy.prompt_style, meta_episodes_per_game=6, seed=0),
                                extra_tokens=action_tokens(cfg))
    model = build_tiny_qwen3(_spec(cfg), len(tokenizer), tokenizer.pad_token_id, tokenizer.bos_token_id,
                             tokenizer.eos_token_id, seed=seed)
    return Policy(cfg, tokenizer, model, make_codec(tokenizer))


def perturbed(model: torch.nn.Module, seed: int, scale: float = 0.05) -> dict[str, torch.Tensor]:
    """New weights: ``model``'s plus seeded noise (what an update does, roughly)."""
    g = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}


def decisions_of(metas: list[MetaEpisode]) -> list[list[tuple]]:
    """Everything sampled or observed, per meta-episode, but the log-probabilities."""
    return [[(d.phase, d.episode, d.turn, d.text, d.choice, d.response_ids, d.prompt_ids, d.task_reward,
              d.invalid, d.penalty) for d in m.decisions] for m in metas]


def logprobs_of(metas: list[MetaEpisode]) -> list[float]:
    return [d.logprob for m in metas for d in m.decisions]
