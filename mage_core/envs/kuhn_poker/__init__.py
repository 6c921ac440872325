"""Kuhn Poker (METHOD.md section 11): rules, the agent environment, exact analysis.

``rules`` holds the game (no text), ``env`` the agent's text view of one hand,
``analysis`` exact values with fractions (it imports the opponents' behaviour
strategies, so it is not imported here).
"""

from mage_core.envs.kuhn_poker.env import KuhnPokerEnv, KuhnPokerSettings
from mage_core.envs.kuhn_poker.rules import BET, PASS, KuhnState, deal, initial_state

__all__ = ["BET", "PASS", "KuhnPokerEnv", "KuhnPokerSettings", "KuhnState", "deal", "initial_state"]
