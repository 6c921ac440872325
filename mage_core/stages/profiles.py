"""Profiles of ``reproduce.profiles``: params.yaml with a profile's dotted-key overrides applied.

Kept apart from ``stages.reproduce`` (which runs the flow and imports the DVC side) so that a stage
reading profiles, the ablations stage's recorded verdicts, does not load the flow's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mage_core.config import ConfigError, apply_values, load_config, parse_config


def profile_params(params_path: Path, profile: str) -> dict[str, Any]:
    """params.yaml with ``reproduce.profiles.<profile>`` applied, validated."""
    cfg = load_config(params_path)
    profiles = cfg.reproduce.profiles
    if profile not in profiles:
        raise ConfigError("command line", [f"--profile: {profile!r} is not one of reproduce.profiles "
                                           f"({', '.join(profiles) or 'none defined'})"])
    data = apply_values(yaml.safe_load(params_path.read_text(encoding="utf-8")), profiles[profile],
                        f"reproduce.profiles.{profile}")
    parse_config(data, f"{params_path} with profile {profile}")  # report every problem before any work
    return data
