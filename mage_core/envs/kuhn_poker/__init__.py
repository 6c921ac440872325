"""Kuhn Poker (docs/method.md section 11): rules, the agent environment, exact analysis.

``rules`` holds the game (no text), ``env`` the agent's text view of one hand,
``analysis`` exact values with fractions (it imports the opponents' behaviour
strategies, so it is not imported here), ``meta_solver`` the expectimax across
hands behind its meta-episode values. What the rest of the library reaches through
the task (``task``): ``ceilings`` (an evaluation suite's exact ceilings),
``exact_greedy`` (the greedy policy's exact value), ``probes`` and ``second_hand``
(the policy's first and second hands read as strategies), ``league`` (what
``train.league`` adds) and ``commands`` (``mage kuhn analyze``, ``mage kuhn probe``).
"""
