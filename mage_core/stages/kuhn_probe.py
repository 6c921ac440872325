"""``mage kuhn probe``: does a trained Kuhn policy use what its first hand showed?

For the configured population (``population.kuhn_poker``; the exploration pair is
``--set population.kuhn_poker=probe``), the agent acting first: every way hand 1 can go
(the policy's hand-1 moves forced, the opponents answering as they do), the policy's
probability of betting its first decision of hand 2 with each card, next to the posterior
over opponents that hand 1 leaves and the best response to that posterior (docs/learning.md,
"Does it probe?"). The measurement and its table are the task's (``TaskProbes.command``:
``envs/kuhn_poker/second_hand.py`` and ``commands.py``); this stage loads the policy and
hands it over. Needs deterministic opponents, constrained actions, summary reflections, no
retrieval memory and K >= 2; anything else stops before play with the setting named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mage_core.config import ConfigError, load_config
from mage_core.envs.registry import resolve, task


def probe_trainer(cfg: Any, policy_dir: Path) -> Any:
    """An evaluation-only trainer (``MetaRLTrainer``) of the policy in ``policy_dir``, once the
    task and the policy's files are checked."""
    import torch

    from mage_core.policy.model import load_policy, verify_policy
    from mage_core.stages.train_model import make_codec, make_generator
    from mage_core.trainers.meta_rl import MetaRLTrainer

    if not task(cfg.env.name).strategy_probes:
        raise ConfigError("params", [f"env.name: `mage kuhn probe` reads a Kuhn Poker policy, got {cfg.env.name!r}; "
                                     "pass --set env.name=kuhn_poker"])
    if not (policy_dir / "config.json").is_file():
        raise ConfigError("command line", [f"--policy: {policy_dir} holds no model (config.json missing); pass a "
                                           "`mage train` output's best/ or policy-init/"])
    try:
        verify_policy(policy_dir)
    except ValueError as err:
        raise ConfigError("command line", [f"--policy: {err}"]) from None
    torch.set_num_threads(cfg.train.num_threads)
    model, tokenizer = load_policy(policy_dir, dtype=getattr(torch, cfg.model.dtype), verified=True)
    cfg = cfg.model_copy(update={"backend": cfg.backend.model_copy(update={"generator": "hf"}),
                                 "rollout": cfg.rollout.model_copy(update={"workers": 0})})
    generator = make_generator(cfg, tokenizer, policy_dir, model, copy_model=False)
    return MetaRLTrainer(cfg, None, generator, make_codec(tokenizer, cfg.policy))


def run(params: str, policy: str, csv_path: str | None = None, overrides: Sequence[str] = ()) -> int:
    from mage_core.trainers.probes import TrainerView

    cfg = load_config(params, overrides)
    trainer = probe_trainer(cfg, Path(policy))
    command = resolve(task(cfg.env.name).strategy_probes.command)  # type: ignore[union-attr]
    return command(TrainerView(trainer), cfg.population.entries(cfg.env.name), csv_path)
