"""``mage kuhn probe``: does a trained Kuhn policy use what its first hand showed?

For the configured population (``population.kuhn_poker``; the exploration pair is
``--set population.kuhn_poker=probe``), the agent acting first: every way hand 1 can go
(the policy's hand-1 moves forced, the opponents answering as they do), the policy's
probability of betting its first decision of hand 2 with each card, next to the posterior
over opponents that hand 1 leaves and the best response to that posterior
(``trainers.strategy_probes.second_hand_bets``; docs/learning.md, "Does it probe?").
Needs deterministic opponents, constrained actions, summary reflections, no retrieval memory and
K >= 2; anything else stops before play with the setting named (``second_hand_unreadable``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from mage_core.config import ConfigError, load_config
from mage_core.envs.registry import task

MOVES = {1: "bet", 0: "check", None: "either"}


def probe_rows(cfg: Any, policy_dir: Path) -> list[dict[str, Any]]:
    """``second_hand_bets`` for the policy in ``policy_dir`` against the configured Kuhn population."""
    import torch

    from mage_core.policy.model import load_policy, verify_policy
    from mage_core.stages.train_model import make_codec, make_generator
    from mage_core.trainers import strategy_probes
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
    trainer = MetaRLTrainer(cfg, None, generator, make_codec(tokenizer, cfg.policy))
    entries = cfg.population.entries(cfg.env.name)
    reason = strategy_probes.second_hand_unreadable(trainer, entries)
    if reason is not None:
        raise ConfigError("params", [reason])
    rows = strategy_probes.second_hand_bets(trainer, entries)
    if not rows:
        raise ConfigError("params", ["rollout.early_stop: every meta-episode stopped after hand 1, so no hand 2 "
                                     "was played; probe with --set rollout.early_stop=false"])
    return rows


def run(params: str, policy: str, csv_path: str | None = None, overrides: Sequence[str] = ()) -> int:
    cfg = load_config(params, overrides)
    rows = probe_rows(cfg, Path(policy))
    from mage_core.trainers.strategy_probes import second_hand_metrics

    console = Console()
    table = Table(title="Hand 2 after hand 1, the agent first to act: the policy's P(BET) at its first hand-2 "
                        "decision (read from its scores) and the best response to the posterior for that hand")
    for col in ("hand 1 (agent's card: betting)", "P(view)", "posterior", "hand-2 card", "policy P(BET)",
                "best response", "Bayes-optimal?"):
        table.add_column(col)
    for row in rows:
        posterior = ", ".join(f"{n} {p:.2f}" for n, p in row["posterior"].items())
        table.add_row(row["view"], f"{row['p_view']:.3f}", posterior, row["card"], f"{row['p_bet']:.3f}",
                      MOVES[row["best_bet"]], "yes" if row["bayes_bet"] is not None else f"no: {row['note']}")
    console.print(table)
    for key, value in second_hand_metrics(rows).items():
        console.print(f"{key.removeprefix('all/')}: {value:.3f}")
    if csv_path is not None:
        from io import StringIO

        from mage_core.io.atomic import write_text_atomic

        text = StringIO()
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "posterior": json.dumps(r["posterior"])} for r in rows)
        path = Path(csv_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text.getvalue())  # never a half-written table
        console.print(f"written to {path}")
    return 0
