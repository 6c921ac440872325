"""Kuhn Poker's own commands: what ``mage kuhn analyze`` and ``mage kuhn probe`` print.

``analyze`` (the task's ``Task.analyze``): per opponent, the best-response value and
strategy in each seat. For the configured Kuhn population: per seat the best single fixed
strategy, the value of knowing the opponent, the final hand of a "play fixed, then respond"
agent (no probing) and the Bayes-optimal final-hand value of a meta-episode (fresh deal each
hand, and the same deal replayed), then the seat-weighted total (docs/method.md section 11;
``ceilings``). All values are exact fractions.

``probe`` (``TaskProbes.command``): the rows of ``second_hand.second_hand_bets`` for a
trained policy, as a table (and a CSV file).

The stages that call them (``stages.analyze``, ``stages.kuhn_probe``) load the configuration
and the policy; these take them ready.
"""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from mage_core.envs.kuhn_poker import analysis
from mage_core.envs.kuhn_poker.ceilings import behaviour, population_mixes
from mage_core.envs.kuhn_poker.second_hand import second_hand_bets, second_hand_metrics, second_hand_unreadable
from mage_core.envs.policy_view import PolicyView
from mage_core.opponents.kuhn import BehaviourStrategy
from mage_core.opponents.population import PopulationEntry
from mage_core.opponents.registry import check_opponent_name
from mage_core.schema import ConfigError

SEAT_NAMES = {0: "first", 1: "second"}


def population_ceilings(
    mixes: dict[int, tuple[Fraction, list[tuple[Fraction, BehaviourStrategy]]]], num_hands: int
) -> list[dict[str, object]]:
    """Rows per agent seat and the seat-weighted total.

    ``mixes``: seat -> (probability of the seat, opponent mix given the seat)
    (``ceilings.population_mixes``).
    """
    measures: dict[str, Callable[[list, int], Fraction]] = {
        "best fixed strategy": lambda mix, seat: analysis.best_response(mix, seat)[0],
        "opponent known": lambda mix, seat: analysis.type_known_value(mix, seat),
    }
    for restart in ("fresh", "same") if num_hands > 0 else ():
        measures[f"passive K={num_hands} {restart}"] = lambda mix, seat, r=restart: analysis.passive_meta_value(
            mix, num_hands, r, seat)
    if num_hands > 0:
        measures[f"Bayes K={num_hands} fresh"] = lambda mix, seat: analysis.bayes_optimal_meta_value(
            mix, num_hands, "fresh", seat)
        measures[f"Bayes K={num_hands} same"] = lambda mix, seat: analysis.bayes_optimal_meta_value(
            mix, num_hands, "same", seat)
    rows: list[dict[str, object]] = []
    total = {name: Fraction(0) for name in measures}
    for seat, (p_seat, mix) in sorted(mixes.items()):
        row: dict[str, object] = {"seat": SEAT_NAMES[seat], "probability": p_seat}
        for name, fn in measures.items():
            value = fn(mix, seat)
            row[name] = value
            total[name] += p_seat * value
        rows.append(row)
    rows.append({"seat": "all (weighted)", "probability": Fraction(1), **total})
    return rows


def analyze(cfg: Any, opponents: Sequence[str] | None = None, meta_hands: int = 3) -> int:
    """``mage kuhn analyze`` on the loaded configuration ``cfg``: the tables, exit code 0;
    ``ConfigError`` naming a bad option."""
    settings = cfg.opponents.settings()
    if meta_hands < 0 or meta_hands > 8:
        raise ConfigError("command line", [f"--meta-hands: must lie in 0..8, got {meta_hands}"])
    entries = cfg.population.entries("kuhn_poker")
    if opponents:
        problems = [f"--opponent: {p}" for name in opponents
                    if (p := check_opponent_name("kuhn_poker", name, settings.kuhn_strategies))]
        if problems:
            raise ConfigError("command line", problems)
        names = list(opponents)
    else:
        names = list(dict.fromkeys([e.opponent for e in entries] + list(settings.kuhn_strategies)))
    console = Console()
    table = Table(title="Best response per opponent (agent's chips per hand, exact)")
    for col in ("opponent", "agent seat", "best-response value", "best response (P(BET)=1 at)", "indifferent"):
        table.add_column(col)
    for name in names:
        for row in analysis.opponent_report(behaviour(name, settings)):
            bets = [k for k, v in row["best_response"].items() if v == "BET"]  # type: ignore[union-attr]
            table.add_row(name, SEAT_NAMES[row["agent_seat"]], str(row["best_response_value"]),
                          " ".join(bets) or "-", " ".join(row["indifferent_infosets"]) or "-")  # type: ignore[arg-type]
    console.print(table)
    if not opponents:
        spec = cfg.population.kuhn_poker
        rows = population_ceilings(population_mixes(entries, settings), meta_hands)
        title = (f"Population '{spec if isinstance(spec, str) else 'custom'}': final-hand chips per hand "
                 "(best fixed = no adaptation; Bayes = best adaptive agent, only the last hand counts)")
        pop_table = Table(title=title)
        for col in rows[0]:
            pop_table.add_column(col)
        for row in rows:
            pop_table.add_row(*[v if isinstance(v, str) else analysis.format_fraction(v) for v in row.values()])
        console.print(pop_table)
        beta_families = {name: spec for name, spec in cfg.opponents.kuhn_families.items() if spec.prior == "beta"}
        if beta_families and meta_hands > 0:  # a styles family is its members: the population table above
            console.print(prior_table(beta_families, meta_hands))
    return 0


#: Opponents drawn for the Monte Carlo "opponent known" value of a continuous prior.
PRIOR_SAMPLES = 2000


def prior_table(families: Mapping[str, Any], meta_hands: int) -> Table:
    """Each generated family's continuous prior, without rounding or a finite
    count: exact ceilings (``analysis.beta_prior_*``, seats averaged) and the
    "opponent known" value sampled over ``PRIOR_SAMPLES`` draws, with its error."""
    from mage_core.opponents.kuhn import BehaviourStrategy
    from mage_core.opponents.kuhn_families import KuhnFamily, prior_draw

    table = Table(title=f"Generated families' priors (infinitely many players; K={meta_hands}, seats averaged): "
                        "exact, except opponent known (sampled: mean +- standard error)")
    for col in ("family", "prior", "best fixed strategy", f"passive K={meta_hands} fresh",
                f"Bayes K={meta_hands} fresh", f"Bayes K={meta_hands} same", f"opponent known ({PRIOR_SAMPLES} draws)"):
        table.add_column(col)
    for name, spec in families.items():
        family = KuhnFamily(count=spec.count, seed=spec.seed, prior=spec.prior, alpha=spec.alpha, beta=spec.beta,
                            grid=spec.grid)
        a, b = Fraction(family.alpha).limit_denominator(10**6), Fraction(family.beta).limit_denominator(10**6)
        values = [analysis.mean_over_seats(lambda seat, f=f: f(seat)) for f in (
            lambda seat: analysis.beta_prior_meta_value(a, b, 1, "fresh", seat),
            lambda seat: analysis.beta_prior_passive_value(a, b, meta_hands, "fresh", seat),
            lambda seat: analysis.beta_prior_meta_value(a, b, meta_hands, "fresh", seat),
            lambda seat: analysis.beta_prior_meta_value(a, b, meta_hands, "same", seat))]
        draws = [BehaviourStrategy(f"{name}-prior-{i}", prior_draw(family, i)) for i in range(PRIOR_SAMPLES)]
        known = [analysis.sampled_known_value(draws.__getitem__, PRIOR_SAMPLES, seat) for seat in (0, 1)]
        mean, error = sum(m for m, _ in known) / 2, (sum(e * e for _, e in known) ** 0.5) / 2
        table.add_row(name, f"Beta({family.alpha:g}, {family.beta:g})",
                      *(f"{float(v):.4f}" for v in values), f"{mean:.4f} +- {error:.4f}")
    return table


#: ``best_bet`` as ``mage kuhn probe`` prints it.
MOVES = {1: "bet", 0: "check", None: "either"}


def probe(policy: PolicyView, entries: Sequence[PopulationEntry], csv_path: str | None = None) -> int:
    """``mage kuhn probe``: the policy's hand-2 bets after every hand 1 against ``entries``
    (``second_hand_bets``) as a table and its summary figures, and with ``csv_path`` as a CSV
    file; ``ConfigError`` naming the setting where they cannot be read."""
    reason = second_hand_unreadable(policy, entries)
    if reason is not None:
        raise ConfigError("params", [reason])
    rows = second_hand_bets(policy, entries)
    if not rows:
        raise ConfigError("params", ["rollout.early_stop: every meta-episode stopped after hand 1, so no hand 2 "
                                     "was played; probe with --set rollout.early_stop=false"])
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
