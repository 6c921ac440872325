"""Composition roots: read the config, build objects, run, write outputs.

Each stage is a plain function ``run(...) -> exit status`` that the CLI calls.
"""
