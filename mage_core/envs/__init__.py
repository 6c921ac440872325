"""Games and tasks: rules, text rendering, action parsing. Pure Python + numpy."""
