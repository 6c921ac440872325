"""What an evaluate run adds to MLflow so that runs compare in one click.

``log_comparison`` is called by ``mage evaluate`` on its run, after its ``eval/...`` metrics:

- the K-independent keys ``table1/in_domain/*`` (step 0) and the adaptation curves
  ``adaptation/<suite>/*`` (step = episode index): ``mage_core.evaluation.comparison``;
- the registered model version it evaluated, found by the digest of the policy's files
  (``mage_core.tracking.registry``): tags ``mage.model`` (``name/version``) and
  ``mage.model_uri`` (``models:/name/version``), and the run's description (its note in the
  UI) links the version's page;
- the saved views "Table 1: <environment> by method" and "Table 1: every environment by
  method" of the experiment (``mage_core.tracking.views``), written if missing or stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from mage_core.evaluation.comparison import adaptation_metrics, table1_metrics

NOTE_TAG = "mlflow.note.content"  # the run's description in the UI (markdown)


def log_comparison(run: Any, metrics: Mapping[str, float], env: str, method: str, policy: Path,
                   labels: Mapping[str, str] | None = None) -> dict[str, float]:
    """Log the comparison keys, the model link and the views (module docstring) on ``run``
    (an ``MlflowTracker``); returns the ``table1/*`` metrics logged."""
    from mage_core.tracking.registry import find_version, model_uri, version_link
    from mage_core.tracking.views import ensure_table1_views

    table1 = table1_metrics(metrics)
    run.log_metrics(0, table1)
    for step, values in adaptation_metrics(metrics).items():
        run.log_metrics(step, values)
    found = find_version(run, env, method, policy)
    if found is not None:
        name, version = found
        run.set_tags({"mage.model": f"{name}/{version}", "mage.model_uri": model_uri(name, version),
                      NOTE_TAG: f"Evaluates the registered model {version_link(name, version)} "
                                f"(`{model_uri(name, version)}`), policy `{policy}`."})
    ensure_table1_views(run.client, run.experiment_id, [env], labels)
    return table1
