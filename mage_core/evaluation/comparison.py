"""Metric keys that every evaluation run shares, whatever its K: what runs are compared on.

``mage evaluate`` writes ``eval/<suite>/<group>/<name>`` keys whose names carry the episode
index (``success_ep3``, ``pass_at_3``): a single-episode baseline evaluated over K = 1
attempt and a meta-RL run over K = 3 share no key for "the final episode", so an MLflow chart
or table column across them would be empty for one side. Each evaluate run therefore also
logs, to MLflow only (``metrics.json``, a DVC output, is unchanged):

- ``table1/in_domain/<name>``: Table 1's figures, the same numbers as the report's Table 1
  (``mage_core.evaluation.aggregate.table1``: the in-domain suite, the whole population,
  the run's final episode K):

  | key | from ``eval/in_domain/all/...`` |
  |---|---|
  | ``success_final`` (``_low``, ``_high``: 95% interval) | ``success_ep{K}`` |
  | ``pass_at_k`` (``_low``, ``_high``) | ``pass_at_{K}`` |
  | ``chips_final`` (``_low``, ``_high``), Kuhn Poker | ``chips_ep{K}`` |
  | ``chips_exact_final``, Kuhn Poker where computed | ``chips_exact_ep{K}`` (greedy, exact) |
  | ``k`` | K itself |

- ``adaptation/<suite>/<measure>`` at step k = 1..K: the population's ``success``, and
  ``chips`` (Kuhn Poker) or ``reward`` (the other tasks), of episode k of every suite: the
  adaptation curve, one point per episode index, drawn by MLflow's line charts against
  the step.
"""

from __future__ import annotations

import re
from typing import Mapping

from mage_core.envs.registry import GAMES, task

TABLE1 = "table1"
ADAPTATION = "adaptation"
TABLE1_SUITE = "in_domain"  # aggregate.IN_DOMAIN, without importing pandas
GROUP = "all"  # the population-weighted group
_EPISODE = re.compile(r"^(success|chips|reward)_ep(\d+)$")


def table1_names(env: str | None) -> list[str]:
    """The Table 1 measures of ``env`` (None: those any environment has), as the report
    orders them: a scored task's score (Kuhn's chips) first."""
    if env is None:
        return ["success_final", "pass_at_k", *(f"{unit}_final" for unit in scored_units())]
    spec = task(env)
    if not spec.scored:
        return ["success_final", "pass_at_k"]
    exact = [f"{spec.headline}_exact_final"] if spec.exact_values else []
    return [f"{spec.headline}_final", *exact, "success_final", "pass_at_k"]


def scored_units(env: str | None = None) -> list[str]:
    """The score units a report of ``env`` (None: every task) shows beside success (Kuhn's chips)."""
    games = GAMES if env is None else (env,)
    return list(dict.fromkeys(task(g).headline for g in games if task(g).scored))


def final_episode(metrics: Mapping[str, float], suite: str = TABLE1_SUITE) -> int | None:
    """The last episode index K of ``suite``'s population figures (None: suite absent)."""
    prefix = f"eval/{suite}/{GROUP}/"
    ks = [int(m[2]) for key in metrics if key.startswith(prefix)
          and (m := _EPISODE.match(key[len(prefix):])) is not None]
    return max(ks) if ks else None


def table1_metrics(metrics: Mapping[str, float], suite: str = TABLE1_SUITE) -> dict[str, float]:
    """``table1/<suite>/<name>`` for one run's ``eval/...`` metrics (module docstring)."""
    k = final_episode(metrics, suite)
    if k is None:
        return {}
    source, target = f"eval/{suite}/{GROUP}/", f"{TABLE1}/{suite}/"
    pairs = [(f"success_ep{k}", "success_final"), (f"pass_at_{k}", "pass_at_k"), (f"chips_ep{k}", "chips_final")]
    out: dict[str, float] = {}
    for name, alias in pairs:
        for suffix in ("", "_low", "_high"):
            if source + name + suffix in metrics:
                out[target + alias + suffix] = float(metrics[source + name + suffix])
    if source + f"chips_exact_ep{k}" in metrics:
        out[target + "chips_exact_final"] = float(metrics[source + f"chips_exact_ep{k}"])
    out[target + "k"] = float(k)
    return out


def adaptation_metrics(metrics: Mapping[str, float]) -> dict[int, dict[str, float]]:
    """Step (episode index) -> ``adaptation/<suite>/<measure>`` for every suite."""
    out: dict[int, dict[str, float]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if len(parts) != 4 or parts[0] != "eval" or parts[2] != GROUP:
            continue
        m = _EPISODE.match(parts[3])
        if m is not None:
            out.setdefault(int(m[2]), {})[f"{ADAPTATION}/{parts[1]}/{m[1]}"] = float(value)
    return dict(sorted(out.items()))
