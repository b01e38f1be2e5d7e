"""Built-in environment modules."""

from engine.env.modules.economy import EconomySpace
from engine.env.modules.events import EventSpace
from engine.env.modules.games import PrisonersDilemmaGame, PublicGoodsGame, TrustGame
from engine.env.modules.global_info import GlobalInformationSpace
from engine.env.modules.messaging import MessagingSpace
from engine.env.modules.mobility import MobilitySpace
from engine.env.modules.social_media import SocialMediaSpace
from engine.env.modules.weather import WeatherSpace

__all__ = [
    "EconomySpace",
    "EventSpace",
    "GlobalInformationSpace",
    "MessagingSpace",
    "MobilitySpace",
    "PrisonersDilemmaGame",
    "PublicGoodsGame",
    "SocialMediaSpace",
    "TrustGame",
    "WeatherSpace",
]
