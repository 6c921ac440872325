"""Data contracts: Great Expectations suites for the tables passed between stages.

A stage validates a table before it writes it and after it reads one; a failed
expectation stops the pipeline with ``ContractError``, whose message lists
every failed expectation with its column, the rule and a few offending values.
Suites are defined in code (GX 1.x API, an ephemeral context: nothing is
written to disk). great_expectations costs seconds to import, so it is imported
only inside ``validate``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from mage_core.evaluation.trials import NONE, SEAT_NAMES, TRIAL_COLUMNS


class ContractError(ValueError):
    """A table broke its contract; ``failures`` holds one readable line per failed expectation."""

    def __init__(self, table: str, failures: list[str], checked: int) -> None:
        self.table = table
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(f"{table} failed {len(failures)} of {checked} expectations:\n{lines}")


@dataclass(frozen=True)
class Rule:
    """One expectation: the GX class name, its arguments, and what it means in words."""

    kind: str
    kwargs: dict[str, Any]
    says: str


def trial_rules(episodes_per_meta_episode: int, reward_bounds: tuple[float, float],
                opponents: Sequence[str], suites: Sequence[str]) -> list[Rule]:
    """The trial table's contract (``evaluation.trials``)."""
    low, high = reward_bounds
    rules = [
        Rule("ExpectTableColumnsToMatchOrderedList", {"column_list": list(TRIAL_COLUMNS)},
             f"columns are exactly {', '.join(TRIAL_COLUMNS)}"),
        Rule("ExpectTableRowCountToBeBetween", {"min_value": 1}, "the table has rows"),
        Rule("ExpectCompoundColumnsToBeUnique", {"column_list": ["suite", "meta_episode", "episode"]},
             "one row per (suite, meta_episode, episode): no duplicate trials"),
        Rule("ExpectColumnValuesToBeBetween",
             {"column": "episode", "min_value": 1, "max_value": episodes_per_meta_episode},
             f"episode indices lie in 1..{episodes_per_meta_episode}"),
        Rule("ExpectColumnValuesToBeBetween", {"column": "reward", "min_value": low, "max_value": high},
             f"episode rewards lie within the game's bounds [{low:g}, {high:g}]"),
        Rule("ExpectColumnValuesToBeInSet", {"column": "opponent", "value_set": sorted(set(opponents))},
             f"opponents are known ({', '.join(sorted(set(opponents)))})"),
        Rule("ExpectColumnValuesToBeInSet", {"column": "seat", "value_set": [*SEAT_NAMES.values(), NONE]},
             "seats are first, second or none"),
        Rule("ExpectColumnValuesToBeInSet", {"column": "suite", "value_set": sorted(set(suites))},
             f"suites are the ones evaluated ({', '.join(sorted(set(suites)))})"),
        Rule("ExpectColumnValuesToBeInSet", {"column": "success", "value_set": [True, False]}, "success is boolean"),
        Rule("ExpectColumnValuesToBeInSet", {"column": "draw", "value_set": [True, False]}, "draw is boolean"),
        Rule("ExpectColumnValuesToBeBetween", {"column": "invalid", "min_value": 0},
             "invalid-action counts are >= 0"),
        Rule("ExpectColumnValuesToBeBetween", {"column": "turns", "min_value": 1}, "every episode took a turn"),
        Rule("ExpectColumnValuesToBeBetween", {"column": "tokens", "min_value": 0}, "token counts are >= 0"),
    ]
    rules += [Rule("ExpectColumnValuesToNotBeNull", {"column": c}, f"{c} has no missing values")
              for c in TRIAL_COLUMNS]
    return rules


def validate(frame: Any, table: str, rules: Sequence[Rule]) -> None:
    """Run ``rules`` on a pandas DataFrame; raise ``ContractError`` listing every failure."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import great_expectations.expectations as gxe

    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)  # our own output is the one to read
    batch = (context.data_sources.add_pandas(name=f"{table}-source")
             .add_dataframe_asset(name=table)
             .add_batch_definition_whole_dataframe(f"{table}-all"))
    suite = context.suites.add(gx.ExpectationSuite(name=f"{table}-contract"))
    by_id = {}
    for index, rule in enumerate(rules):
        by_id[suite.add_expectation(getattr(gxe, rule.kind)(**rule.kwargs)).id] = (index, rule)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"{table}-validation", data=batch, suite=suite))
    result = definition.run(batch_parameters={"dataframe": frame}, result_format="SUMMARY")
    failures: list[tuple[int, str]] = []
    for outcome in result.results:  # in GX's order, not necessarily the rules'
        index, rule = by_id[outcome.expectation_config.id]
        if outcome.success:
            continue
        detail = outcome.result or {}
        if outcome.exception_info and outcome.exception_info.get("raised_exception"):
            failures.append((index, f"{rule.says}: could not be checked "
                                    f"({outcome.exception_info['exception_message']})"))
            continue
        count = detail.get("unexpected_count")
        examples = detail.get("partial_unexpected_list") or detail.get("observed_value")
        where = f"{count} offending rows" if count is not None else "failed"
        failures.append((index, f"{rule.says}: {where}; e.g. {examples!r}"[:400]))
    if failures:
        raise ContractError(table, [text for _, text in sorted(failures)], len(rules))
