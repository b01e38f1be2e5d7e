"""Contributed agents: game-theory players on the base ReAct loop, and an LLM-free rule-based baseline.

    GameAgent                 shared shape: a move tool, the game's rules in the prompt, a move history
    ├── PrisonersDilemmaAgent play cooperate / defect
    ├── PublicGoodsAgent      contribute 0..endowment to a common pool
    └── TrustGameAgent        invest (investor) or return tokens (trustee)
    RuleBasedAgent            tit-for-tat, grim trigger, threshold, always-C/D over its inbox; no LLM

All registered by name in :mod:`engine.agent.registry`.
"""

from engine.agent.contrib.game import GameAgent
from engine.agent.contrib.prisoners_dilemma import PrisonersDilemmaAgent
from engine.agent.contrib.public_goods import PublicGoodsAgent
from engine.agent.contrib.rule_based import RuleBasedAgent
from engine.agent.contrib.trust_game import TrustGameAgent

__all__ = ["GameAgent", "PrisonersDilemmaAgent", "PublicGoodsAgent", "RuleBasedAgent", "TrustGameAgent"]
