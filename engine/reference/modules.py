"""The reference's ``env_modules`` entries as the spec's environment modules.

``module_type`` goes through :data:`REFERENCE_MODULE_TYPES` (the reference's class names for our
modules), then the environment registry, aliases included (``WeatherEnvironment`` is our
``WeatherSpace``; ``SimpleSocialSpace`` and ``GlobalInformationEnv`` are registered as such: our
``MessagingSpace`` and ``GlobalInformationSpace`` with the reference's tool names; the reference's
``EconomySpace`` is ``PersonEconomySpace``, ours with its per-person tools); the spec stores our name. Module
``kwargs`` must be parameters of our module's constructor. A ``module_type`` given twice is refused:
the reference keys its modules by type, so a second one would silently replace the first.
"""

from __future__ import annotations

from typing import Any

from engine.env.registry import ENV_MODULES, env_module_known, env_module_names, resolve_env_module
from engine.reference.problems import Problems, at, mapping, only

__all__ = ["REFERENCE_MODULE_TYPES", "convert_modules", "our_module_type"]

#: the reference's module class names whose Polis module has another name (and is not a registry alias)
REFERENCE_MODULE_TYPES: dict[str, str] = {
    "EconomySpace": "PersonEconomySpace",
    "PrisonersDilemmaEnv": "PrisonersDilemmaGame",
    "PublicGoodsEnv": "PublicGoodsGame",
    "TrustGameEnv": "TrustGame",
}


def our_module_type(kind: str) -> str | None:
    """Our registered name for the reference's ``module_type``; None when no module fits."""
    kind = REFERENCE_MODULE_TYPES.get(kind, kind)
    if not env_module_known(kind):
        return None
    return kind if kind in env_module_names() else resolve_env_module(kind).__name__


def convert_modules(raw: Any, label: str, problems: Problems) -> list[dict[str, Any]]:
    """``env_modules`` as spec module dicts ``{type, kwargs}``; problems are added, not raised."""
    if not isinstance(raw, list) or not raw:
        problems.add(at(label, "env_modules"), "a non-empty list of {module_type, kwargs} is required")
        return []
    modules: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        where = at(label, "env_modules", i)
        entry = mapping(entry, where, "module_type, kwargs", problems)
        if entry is None:
            continue
        only(entry, ("module_type", "kwargs"), where, problems)
        kind = entry.get("module_type")
        kwargs = mapping(entry.get("kwargs"), f"{where}.kwargs", "constructor kwargs", problems)
        ours = our_module_type(kind) if isinstance(kind, str) else None
        if ours is None:
            known = sorted({*env_module_names(), *REFERENCE_MODULE_TYPES})
            problems.add(f"{where}.module_type", f"unknown environment module type {kind!r}; known: {', '.join(known)}")
            continue
        if ours in seen:
            problems.add(f"{where}.module_type",
                         f"{kind} appears twice (also env_modules.{seen[ours]}); the reference keeps one module per type")
            continue
        seen[ours] = i
        config = ENV_MODULES.config_model(ours)
        for key in kwargs or {}:
            if config.model_config.get("extra") == "forbid" and key not in config.model_fields:
                accepted = config.model_fields
                named = ours if ours == kind else f"{ours} (module_type {kind})"
                problems.add(f"{where}.kwargs.{key}",
                             f"not supported by {named}; it takes: {', '.join(sorted(accepted)) or 'no kwargs'}")
        modules.append({"type": ours, "kwargs": dict(kwargs or {})})
    return modules
