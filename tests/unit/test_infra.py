"""infra/ files are what their tools accept: the Ray cluster config passes Ray's own
cluster schema (the Prefect deployments are checked against a real server in
tests/integration/test_deployments.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_ray_cluster_config_passes_rays_schema() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((ROOT / "infra" / "ray-cluster.yaml").read_text())
    validate_config(prepare_config(config))  # what `ray up` does first; raises naming the field
    assert config["head_node_type"] in config["available_node_types"]
    broken = copy.deepcopy(config)
    broken["available_node_types"]["gpu_8xh100"]["max_worker"] = 4  # a typo the schema must catch
    from jsonschema.exceptions import ValidationError

    with pytest.raises(ValidationError, match="'max_worker' was unexpected"):
        validate_config(prepare_config(broken))
