"""Environment module types by name: built-ins plus the ``polis.env_modules`` entry points."""

from __future__ import annotations

import inspect
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from engine.errors import SpecError

if TYPE_CHECKING:
    from engine.env.base import EnvBase

__all__ = ["env_module_known", "env_module_names", "module_params", "resolve_env_module"]

_BUILTIN = {
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
}
# Names the reference system's configs use for the same modules.
_ALIASES = {"messaging": "MessagingSpace", "WeatherEnvironment": "WeatherSpace"}


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    # Entry points are scanned once per process: the scan reads every installed distribution.
    table = dict(_BUILTIN)
    for ep in entry_points(group="polis.env_modules"):
        table.setdefault(ep.name, ep.value)
    return table


def env_module_names() -> list[str]:
    return sorted(_table())


def env_module_known(name: str) -> bool:
    """True when ``name`` (or its alias) is a registered module type."""
    return _ALIASES.get(name, name) in _table()


def resolve_env_module(name: str) -> type[EnvBase]:
    """The module class registered as ``name``.

    Raises:
        SpecError: no such module type (names the known ones).
    """
    import importlib

    target = _table().get(_ALIASES.get(name, name))
    if target is None:
        raise SpecError(f"unknown environment module type {name!r}; known: {', '.join(env_module_names())}")
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def module_params(cls: type) -> set[str] | None:
    """The keyword arguments ``cls(...)`` takes (what a spec's ``kwargs`` may hold); None when it takes ``**kwargs``."""
    params = list(inspect.signature(cls).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
