"""Does the CPU default learn to exploit? Train, then report on a fixed set.

Usage::

    python benchmarks/learn_kuhn.py --method mage --restart fresh --minutes 30
    python benchmarks/learn_kuhn.py --method mage --restart same --minutes 30
    python benchmarks/learn_kuhn.py --method gigpo --minutes 30
    python benchmarks/learn_kuhn.py --game tic_tac_toe --method mage --minutes 30
    python benchmarks/learn_kuhn.py --game sokoban --method mage --minutes 15
    python benchmarks/learn_kuhn.py --game tic_tac_toe --restart same --greedy --minutes 15
    python benchmarks/learn_kuhn.py --report-only artifacts/bench/kuhn_poker-mage-fresh

Trains the embedded tiny Qwen3 (params.yaml, with the overrides below) for a
wall-clock budget, keeps the best policy by the training-time evaluation, and
evaluates it on a *different* fixed set (``--report-seed``) of
``--per-pair`` meta-episodes per (opponent, seat), so selection does not bias
the reported figures. Prints, per episode index: mean chips (Kuhn) or win and
draw rates, Pass@k; for Kuhn the exploitation ratio (final-episode chips over
the exact best-response value) per opponent and seat, and the population's
final-episode chips against the exact ceilings (docs/method.md section 11), and
whether the final hand beats the first: the population-weighted mean of the
per-meta-episode differences (final hand minus first hand, paired on the same
meta-episode) with its 95% interval, "yes" only when the interval excludes 0.
Writes the figures to ``<out>/report.json``.

``--report-seed`` must differ from ``evaluation.selection_seed`` (the set that
picked the best policy): the script refuses the same seed. It pins the CPU
kernels as the ``mage`` command does (``mage_core.cli.PINNED_CPU_KERNELS``); the
wall-clock budget (``--minutes``) makes the number of iterations, and so the
result, depend on the machine and its load (docs/learning.md, "What is
reproducible").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mage_core.cli import EXIT_BAD_INPUT, PINNED_CPU_KERNELS  # noqa: E402  (argparse only: no torch)

for _key, _value in PINNED_CPU_KERNELS.items():  # before torch loads, as `mage` does; the environment wins
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from mage_core.config import Config, load_config  # noqa: E402
from mage_core.evaluation.stats import Z95  # noqa: E402
from mage_core.evaluation.trials import SEAT_NAMES  # noqa: E402
from mage_core.io.atomic import write_json_atomic  # noqa: E402

console = Console()


def configure(base: Config, game: str, method: str, restart: str, minutes: float, threads: int,
              iterations: int, overrides: list[str] = ()) -> Config:
    data = base.model_dump(mode="json")
    data["env"]["name"] = game
    # The method preset decides the algorithm; the profile's tuning knobs
    # (normalization, group scope) are kept where the preset leaves them at MAGE's.
    from mage_core.config.presets import preset_values

    chosen, mage = preset_values(method), preset_values("mage")
    data["algorithm"] = {"preset": method, **{key: getattr(base.algorithm, key) for key in ("episode_norm", "group_scope")
                                              if chosen[key] == mage[key]}}
    data["rollout"]["restart"] = restart
    data["rollout"]["early_stop"] = False  # all K episodes are played (the protocol)
    # The learning-rate and entropy schedules run over `iterations`; the time budget
    # may stop the run earlier.
    data["train"].update({"iterations": iterations, "time_budget_minutes": minutes, "num_threads": threads})
    data["tournament"] = {"matches": []}
    from mage_core.config import apply_overrides, parse_config

    data = apply_overrides(data, overrides)  # --set section.key=value, applied last
    return parse_config(data, "benchmark overrides")


def paired_difference(rows: Sequence[Mapping[str, Any]], k: int,
                      weights: Mapping[tuple[str, int], float] | None = None) -> tuple[float, float, float]:
    """(mean, low, high): episode ``k``'s score minus episode 1's, paired on each
    meta-episode (its last played episode when it stopped early, as the report's
    figures count it), with a 95% normal interval.

    ``rows`` are trial rows (``evaluation.trials.trial_rows``: opponent, seat name,
    meta_episode, episode, score). With ``weights`` (the population probability of
    each (opponent, seat index)) the mean is the weighted mean of the pairs' means,
    and its variance the sum of (weight / total)^2 x variance / n over the pairs
    (independent samples; sample variances, n - 1); without, every meta-episode
    counts once. Each pair needs at least 2 meta-episodes."""
    if k < 2:
        raise ValueError(f"k must be at least 2 (final minus first episode), got {k}")
    episodes: dict[Any, dict[int, float]] = defaultdict(dict)
    pair_of: dict[Any, tuple[str, str]] = {}
    for row in rows:
        episodes[row["meta_episode"]][int(row["episode"])] = float(row["score"])
        pair_of[row["meta_episode"]] = (row["opponent"], row["seat"])
    groups: dict[tuple[str, str] | None, list[float]] = defaultdict(list)
    for meta, scores in episodes.items():
        if 1 not in scores:
            raise ValueError(f"meta-episode {meta} has no first episode")
        final = scores.get(k, scores[max(scores)])  # stopped early: its last played episode counts
        groups[pair_of[meta] if weights is not None else None].append(final - scores[1])
    if weights is None:
        shares = {None: 1.0}
    else:
        named = {(opponent, SEAT_NAMES[seat]): w for (opponent, seat), w in weights.items() if w > 0}
        if not set(groups) <= set(named):
            raise ValueError(f"rows of pairs without a weight: {sorted(set(groups) - set(named))}")
        total = sum(named[g] for g in groups)
        shares = {g: named[g] / total for g in groups}
    mean = variance = 0.0
    for g, diffs in groups.items():
        n = len(diffs)
        if n < 2:
            raise ValueError(f"{g or 'the set'}: {n} meta-episode(s); the interval needs at least 2 per pair")
        m = sum(diffs) / n
        mean += shares[g] * m
        variance += shares[g] ** 2 * sum((d - m) ** 2 for d in diffs) / (n - 1) / n
    half = Z95 * math.sqrt(variance)
    return mean, mean - half, mean + half


def beats_verdict(low: float, high: float) -> str:
    """Does the final episode beat the first? "yes" only when the 95% interval of the
    paired difference excludes 0 from above."""
    if low > 0:
        return "yes (the 95% interval of final minus first excludes 0)"
    if high < 0:
        return "no: the final hand is below the first (the interval excludes 0 from below)"
    return "not shown: the 95% interval includes 0"


def evaluate_best(cfg: Config, out: Path, per_pair: int, seed: int, policy: str = "best") -> tuple[dict[str, float], int]:
    """The policy's report-set metrics; for Kuhn also ``eval/all/chips_final_minus_first``
    (with ``_low`` and ``_high``): ``paired_difference`` of the meta-episodes' chips."""
    from mage_core.backends.hf import HFGenerator
    from mage_core.evaluation.suites import selection_suite
    from mage_core.evaluation.trials import trial_rows
    from mage_core.policy.model import load_policy
    from mage_core.stages.train import make_codec
    from mage_core.trainers.meta_rl import MetaRLTrainer

    model, tokenizer = load_policy(out / policy)
    trainer = MetaRLTrainer(cfg, None, HFGenerator(model, pad_token_id=tokenizer.pad_token_id),  # type: ignore[arg-type]
                            make_codec(tokenizer))
    # Kuhn: with the exact greedy value. The meta-episodes are the ones the sampled figures average.
    metrics, metas = trainer.evaluate(per_opponent_seat=per_pair, seed=seed)
    k = trainer.eval_settings.num_episodes
    if cfg.env.name == "kuhn_poker" and k >= 2:
        rows = trial_rows(metas, "report", cfg.env.kuhn_poker.reward_per_chip)
        key = "eval/all/chips_final_minus_first"
        metrics[key], metrics[f"{key}_low"], metrics[f"{key}_high"] = paired_difference(
            rows, k, selection_suite(cfg).weights())
    return metrics, k


def kuhn_tables(cfg: Config, metrics: dict[str, float], k: int) -> dict[str, float]:
    from mage_core.envs.kuhn_poker import analysis
    from mage_core.envs.kuhn_poker.ceilings import behaviour, population_mixes
    from mage_core.opponents.population import Population
    from mage_core.envs.kuhn_poker.commands import population_ceilings

    settings = cfg.opponents.settings()
    entries = cfg.population.entries("kuhn_poker")
    table = Table(title="Kuhn Poker: chips per hand by episode index (fixed report set)")
    for col in ["opponent / seat", *[f"ep{i}" for i in range(1, k + 1)], "best response", "exploitation ratio",
                *[f"pass@{i}" for i in range(1, k + 1)]]:
        table.add_column(col, justify="right")
    figures: dict[str, float] = {}
    for (name, seat), _ in sorted(Population(entries).probabilities().items()):
        group = f"eval/{name}/{'first' if seat == 0 else 'second'}"
        br = analysis.best_response([(1, behaviour(name, settings))], seat)[0]
        final = metrics[f"{group}/chips_ep{k}"]
        ratio = final / float(br)
        figures[f"{group}/exploitation_ratio"] = ratio
        table.add_row(group.removeprefix("eval/"), *[f"{metrics[f'{group}/chips_ep{i}']:+.3f}" for i in range(1, k + 1)],
                      analysis.format_fraction(br), f"{ratio:.2f}",
                      *[f"{metrics[f'{group}/pass_at_{i}']:.3f}" for i in range(1, k + 1)])
    console.print(table)
    ceilings = population_ceilings(population_mixes(entries, settings), k)[-1]
    restart = cfg.rollout.restart
    bayes = ceilings[f"Bayes K={k} {restart}"]
    final = metrics[f"eval/all/chips_ep{k}"]
    first = metrics["eval/all/chips_ep1"]
    figures.update({
        "population/final_chips": final, "population/first_chips": first,
        "population/ceiling_bayes": float(bayes), "population/best_fixed": float(ceilings["best fixed strategy"]),
        "population/ratio_to_ceiling": final / float(bayes),
    })
    summary = Table(title=f"Population average (restart {restart}, K={k})")
    for col in ("figure", "value"):
        summary.add_column(col)
    summary.add_row("final-episode chips per hand", f"{final:+.4f}")
    exact = metrics.get(f"eval/all/chips_exact_ep{k}")
    if exact is not None:  # the greedy policy, every opponent, seat and deal enumerated
        figures["population/final_chips_exact_greedy"] = exact
        figures["population/ratio_to_ceiling_exact_greedy"] = exact / float(bayes)
        summary.add_row("final-episode chips, greedy, exact", f"{exact:+.4f}")
        summary.add_row("greedy exact: ratio to ceiling", f"{exact / float(bayes):.3f}")
    summary.add_row("first-episode chips per hand", f"{first:+.4f}")
    diff = "eval/all/chips_final_minus_first"
    if diff in metrics:  # paired on each meta-episode, population-weighted
        low, high = metrics[f"{diff}_low"], metrics[f"{diff}_high"]
        figures.update({"population/final_minus_first": metrics[diff],
                        "population/final_minus_first_low": low, "population/final_minus_first_high": high})
        summary.add_row("final minus first hand (95%, paired per meta-episode)",
                        f"{metrics[diff]:+.4f} [{low:+.4f}, {high:+.4f}]")
        summary.add_row("final beats first", beats_verdict(low, high))
    summary.add_row("best non-adaptive strategy", analysis.format_fraction(Fraction(ceilings["best fixed strategy"])))
    summary.add_row(f"Bayes-optimal ceiling ({restart})", analysis.format_fraction(Fraction(bayes)))
    summary.add_row("ratio to ceiling", f"{final / float(bayes):.3f}")
    console.print(summary)
    return figures


def ttt_table(cfg: Config, metrics: dict[str, float], k: int, ceiling: dict | None = None) -> dict[str, float]:
    """Tic-Tac-Toe (per opponent and seat) and Sokoban (one group): success and draw rates;
    with ``ceiling`` (the JSON of ``mage ttt analyze --out``) the best response's played win rate."""
    table = Table(title=f"{cfg.env.name}: success (and success+draw) rate by episode index (fixed report set)")
    table.add_column("opponent / seat", no_wrap=True)
    for i in range(1, k + 1):
        table.add_column(f"ep{i} win", justify="right")
        table.add_column(f"ep{i} win+draw", justify="right")
    if ceiling is not None:
        table.add_column("best response win", justify="right")
    figures: dict[str, float] = {}
    groups = sorted({key.split("/")[1] + "/" + key.split("/")[2] for key in metrics
                     if key.startswith("eval/") and not key.startswith("eval/all/")})
    for g in [*groups, "all"]:
        prefix = f"eval/{g}" if g != "all" else "eval/all"
        cells = []
        for i in range(1, k + 1):
            win, draw = metrics[f"{prefix}/success_ep{i}"], metrics[f"{prefix}/draw_ep{i}"]
            figures[f"{prefix}/win_or_draw_ep{i}"] = win + draw
            cells += [f"{win:.3f}", f"{win + draw:.3f}"]
        if ceiling is not None:
            if g == "all":
                best = ceiling["population"]["all (weighted)"]["win_win"]
            else:
                opponent, seat = g.split("/")
                best = ceiling["opponents"][opponent][{"first": "0", "second": "1"}[seat]]["win"]["played"]["win"]
            figures[f"{prefix}/best_response_win"] = best
            cells.append(f"{best:.3f}")
        table.add_row(g, *cells)
    console.print(table)
    return figures


def check_report_args(report_seed: int, per_pair: int, cfg: Config) -> str | None:
    """The one-line problem with the report set's flags, or None."""
    if report_seed == cfg.evaluation.selection_seed:
        return (f"--report-seed {report_seed} is evaluation.selection_seed, the set that picks the best policy; "
                "report on another seed (the figures would be biased upward by the choice)")
    if per_pair < 2:
        return f"--per-pair {per_pair}: at least 2 meta-episodes per (opponent, seat) (the paired interval needs a variance)"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--game", default="kuhn_poker", choices=["kuhn_poker", "tic_tac_toe", "sokoban"])
    parser.add_argument("--method", default="mage")
    parser.add_argument("--restart", default="fresh", choices=["fresh", "same"])
    parser.add_argument("--minutes", type=float, default=30.0, help="training wall-clock budget")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=700, help="schedule length (the budget may stop earlier)")
    parser.add_argument("--per-pair", type=int, default=2000,
                        help="report meta-episodes per (opponent, seat), at least 2")
    parser.add_argument("--report-seed", type=int, default=777_000_777,
                        help="seed of the report set; must differ from evaluation.selection_seed")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a params key after the method preset, e.g. algorithm.grouping=pooled")
    parser.add_argument("--out", help="default: artifacts/bench/<game>-<method>-<restart>")
    parser.add_argument("--report-only", metavar="DIR", help="skip training; report on DIR's best policy")
    parser.add_argument("--ceiling", metavar="FILE",
                        help="Tic-Tac-Toe: the JSON of `mage ttt analyze --out FILE`, printed next to each figure")
    parser.add_argument("--greedy", action="store_true",
                        help="also report the best policy at temperature 0 (its most likely action at every turn)")
    parser.add_argument("--untrained", action="store_true",
                        help="also report the untrained policy (policy-init) on the same set, for comparison")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    out = Path(args.report_only or args.out or ROOT / "artifacts" / "bench" / f"{args.game}-{args.method}-{args.restart}")
    cfg = configure(load_config(args.params), args.game, args.method, args.restart, args.minutes, args.threads,
                    args.iterations, args.set)
    if (problem := check_report_args(args.report_seed, args.per_pair, cfg)) is not None:
        print(f"learn_kuhn.py: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)
    started = time.monotonic()
    training: dict = {}
    if not args.report_only:
        from mage_core.stages.train import train

        training = train(cfg, out)
        console.print(f"trained {training['iterations']} iterations in {training['minutes']:.1f} min; best "
                      f"training-time eval {training['best_score']:+.4f} at iteration {training['best_iteration']}")
    metrics, k = evaluate_best(cfg, out, args.per_pair, args.report_seed)
    ceiling = json.loads(Path(args.ceiling).read_text()) if args.ceiling else None
    figures = kuhn_tables(cfg, metrics, k) if args.game == "kuhn_poker" else ttt_table(cfg, metrics, k, ceiling)
    report = {
        "game": args.game, "method": args.method, "restart": args.restart, "minutes_budget": args.minutes,
        "threads": args.threads, "per_pair": args.per_pair, "report_seed": args.report_seed, "overrides": args.set,
        "training": {k_: v for k_, v in training.items() if k_ != "final_eval"},
        "report_metrics": metrics, "figures": figures, "wall_minutes": (time.monotonic() - started) / 60,
        "untrained_metrics": evaluate_best(cfg, out, args.per_pair, args.report_seed, "policy-init")[0]
        if args.untrained else None,
        "greedy_metrics": None,
    }
    if args.greedy:
        greedy_cfg = configure(load_config(args.params), args.game, args.method, args.restart, args.minutes,
                               args.threads, args.iterations, [*args.set, "evaluation.temperature=0"])
        console.print("the best policy at temperature 0 (greedy), same report set:")
        greedy, _ = evaluate_best(greedy_cfg, out, args.per_pair, args.report_seed)
        report["greedy_metrics"] = greedy
        report["greedy_figures"] = (kuhn_tables(greedy_cfg, greedy, k) if args.game == "kuhn_poker"
                                    else ttt_table(greedy_cfg, greedy, k, ceiling))
    if report["untrained_metrics"] is not None:
        unit = "chips" if args.game == "kuhn_poker" else "success"
        before, after = report["untrained_metrics"], metrics
        console.print("untrained -> trained, " + unit + " by episode: " + ", ".join(
            f"ep{i} {before[f'eval/all/{unit}_ep{i}']:.3f} -> {after[f'eval/all/{unit}_ep{i}']:.3f}" for i in range(1, k + 1)))
    write_json_atomic(out / "report.json", report)
    console.print(f"report written to {out / 'report.json'}")
    print(json.dumps(figures, indent=1, sort_keys=True)[:2000])


if __name__ == "__main__":
    main()
