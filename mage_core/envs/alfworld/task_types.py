"""ALFRED's six task types and the constraints its sampler puts on each.

The constraints are those of ALFRED's ``gen/scripts/generate_trajectories.py``, which
the alfworld wheel does not ship; ``generate`` samples its tasks under them. Plain
data, so it imports without alfworld.
"""

from __future__ import annotations

TASK_TYPES = {
    1: "pick_and_place_simple",
    2: "look_at_obj_in_light",
    3: "pick_clean_then_place_in_recep",
    4: "pick_heat_then_place_in_recep",
    5: "pick_cool_then_place_in_recep",
    6: "pick_two_obj_and_place",
}

# Constraints of ALFRED's sampler (gen/scripts/generate_trajectories.py, not in the wheel).
GOAL_TO_PICKUP_TYPE = {
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
    "pick_clean_then_place_in_recep": "Cleanable",
}
GOAL_TO_INVALID_RECEPTACLE = {
    "pick_heat_then_place_in_recep": {"Microwave"},
    "pick_cool_then_place_in_recep": {"Fridge"},
    "pick_clean_then_place_in_recep": {"SinkBasin"},
    "pick_two_obj_and_place": {"CoffeeMachine", "ToiletPaperHanger", "HandTowelHolder"},
}
# Appliance each transform task needs (the domain's HeatObject/CoolObject/CleanObject).
GOAL_TO_APPLIANCE = {
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
    "pick_clean_then_place_in_recep": "SinkBasin",
}
