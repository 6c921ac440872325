"""Best policies in the MLflow model registry: one registered model per (environment, method).

At the end of a training run (``tracking.register_models``), ``register_best`` logs the run's
``best/`` folder (the Hugging Face model folder: weights, config, tokenizer) as the run's
artifact ``best`` and registers it as a new version of ``mage-<env>-<method>``, tagged with
its lineage:

- ``git.commit``, ``git.dirty``, ``mage.config_digest``, ``dvc.stage``: what made it (the
  run's own lineage tags, ``mlflow_tracker.run_tags``);
- ``env``, ``method``, ``seed``, ``mage.run``: which run of Table 1 it is;
- ``mage.policy_sha256``: the digest of ``best/``'s files (``folder_digest``), by which an
  evaluation finds the version it evaluated (``find_version``);
- ``mage.best_iteration``, ``mage.best_score``, ``mage.select_on``: when it was picked, on what;
- ``dvc.out.<path>`` and ``dvc.dep.<path>``: the hashes DVC recorded for the stage's outputs
  (the checkpoint ``best/``) and inputs (the generated data, the code), added by the flow once
  DVC has recorded them (``flows/graph.py``; a stage cannot know them while it runs).

Evaluation-only baselines (``algorithm.agent`` other than ``trained``) register nothing:
their ``best/`` is the model as given.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

DIGEST_TAG = "mage.policy_sha256"
ARTIFACT_PATH = "best"
#: Run tags copied onto a model version (the lineage; ``dvc.out.*``/``dvc.dep.*`` come from the flow).
LINEAGE_TAGS = ("git.commit", "git.dirty", "mage.config_digest", "dvc.stage", "dvc.experiment", "env", "method",
                "seed", "mage.run")


def model_name(env: str, method: str) -> str:
    return f"mage-{env}-{method}"


def folder_digest(folder: str | Path) -> str:
    """sha256 over ``folder``'s files: each relative path, its size and its bytes, in path
    order (the same files give the same digest wherever the folder lies)."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder).as_posix()}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def register_best(run: Any, best: Path, run_tags: Mapping[str, str], extra: Mapping[str, Any]) -> tuple[str, str]:
    """Register ``best`` from ``run`` (an ``MlflowTracker``) as a version of
    ``mage-<env>-<method>``; (model name, version). ``run_tags``: the run's lineage and
    identity tags (``env`` and ``method`` among them)."""
    name = model_name(run_tags["env"], run_tags["method"])
    tags = {key: str(run_tags[key]) for key in LINEAGE_TAGS if key in run_tags}
    tags[DIGEST_TAG] = folder_digest(best)
    tags.update({key: str(value) for key, value in extra.items()})
    description = (f"Best policies (best/) of MAGE pipeline training runs: environment {run_tags['env']}, "
                   f"method {run_tags['method']}.")
    version = run.register_folder(best, name, ARTIFACT_PATH, tags, description)
    return name, version


def find_version(run: Any, env: str, method: str, policy: Path) -> tuple[str, str] | None:
    """The registered version of ``mage-<env>-<method>`` whose files are ``policy``'s
    (newest first), or None (a baseline, registration off, or weights never registered)."""
    if not (policy / "config.json").is_file():
        return None
    name = model_name(env, method)
    version = run.find_model_version(name, DIGEST_TAG, folder_digest(policy))
    return None if version is None else (name, version)


def model_uri(name: str, version: str) -> str:
    return f"models:/{name}/{version}"


def version_link(name: str, version: str) -> str:
    """Markdown link to the version's page in the UI (relative to the UI's address)."""
    return f"[{name} version {version}](#/models/{name}/versions/{version})"
