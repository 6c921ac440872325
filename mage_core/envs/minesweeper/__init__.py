"""MineSweeper (LaMer's fourth environment): ``board`` the rules and the safe-move oracle,
``env`` the agent's text view, ``params`` its section of params.yaml, ``task`` what it tells
the rest of the library (docs/environments.md, "MineSweeper")."""
