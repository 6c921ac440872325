"""Kuhn Poker (docs/method.md section 11): rules, the agent environment, exact analysis.

``rules`` holds the game (no text), ``env`` the agent's text view of one hand,
``analysis`` exact values with fractions (it imports the opponents' behaviour
strategies, so it is not imported here), ``meta_solver`` the expectimax across
hands behind its meta-episode values.
"""
