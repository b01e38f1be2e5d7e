"""Environment module types by name: built-ins plus the ``polis.env_modules`` entry points
(:class:`~engine.plugins.PluginRegistry`). A module's ``Config`` (what a spec's ``kwargs`` for it may hold) is made
from its constructor's typed signature unless the class declares one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.plugins import PluginRegistry

if TYPE_CHECKING:
    from engine.env.base import EnvBase

__all__ = ["ENV_MODULES", "env_module_known", "env_module_names", "resolve_env_module"]

ENV_MODULES: PluginRegistry[EnvBase] = PluginRegistry("environment module type", {
    "MessagingSpace": "engine.env.modules.messaging:MessagingSpace",
    "SimpleSocialSpace": "engine.env.modules.simple_social:SimpleSocialSpace",
    "SocialMediaSpace": "engine.env.modules.social_media:SocialMediaSpace",
    "EconomySpace": "engine.env.modules.economy:EconomySpace",
    "PersonEconomySpace": "engine.env.modules.reference_economy:PersonEconomySpace",
    "EventSpace": "engine.env.modules.events:EventSpace",
    "GlobalInformationSpace": "engine.env.modules.global_info:GlobalInformationSpace",
    "GlobalInformationEnv": "engine.env.modules.reference_global_info:GlobalInformationEnv",
    "MobilitySpace": "engine.env.modules.mobility:MobilitySpace",
    "PrisonersDilemmaGame": "engine.env.modules.games:PrisonersDilemmaGame",
    "PublicGoodsGame": "engine.env.modules.games:PublicGoodsGame",
    "TrustGame": "engine.env.modules.games:TrustGame",
    "WeatherSpace": "engine.env.modules.weather:WeatherSpace",
}, group="polis.env_modules", aliases={"messaging": "MessagingSpace", "WeatherEnvironment": "WeatherSpace"})


def env_module_names() -> list[str]:
    return ENV_MODULES.names()


def env_module_known(name: str) -> bool:
    """True when ``name`` (or its alias) is a registered module type."""
    return ENV_MODULES.known(name)


def resolve_env_module(name: str) -> type[EnvBase]:
    """The module class registered as ``name``.

    Raises:
        SpecError: no such module type (names the known ones).
    """
    return ENV_MODULES.resolve(name)
