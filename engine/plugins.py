"""Plugins by name: agent types, env modules, routers and embedders, each kind one :class:`PluginRegistry`.

A registry knows its built-ins (``"module:attr"`` strings, imported on first use), the classes of an entry-point
group (installed packages), and classes registered in the process (tests, notebooks). Every plugin has a
``Config``, the pydantic model of what a spec may set for it: a class declares one, or gets one made from its
constructor's typed signature (:func:`config_model`). :meth:`PluginRegistry.check_config` is what a spec's field
validators call, so a typo is refused when the spec is parsed, with its path and the nearest name.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import typing
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import PydanticCustomError

from engine.errors import SpecError

__all__ = ["PluginRegistry", "check_config", "config_model", "field_names_at", "unknown_key_message"]

T = TypeVar("T")


class PluginRegistry(Generic[T]):
    """The plugins of one kind, by name.

    Args:
        kind: what a plugin is, in messages (``"agent type"``).
        builtin: name -> ``"module:attr"``.
        group: the entry-point group installed packages add plugins to (None: built-ins only).
        aliases: other names for built-ins (the reference system's).
    """

    def __init__(self, kind: str, builtin: Mapping[str, str], *, group: str | None = None,
                 aliases: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._builtin = dict(builtin)
        self._group = group
        self._aliases = dict(aliases or {})
        self._registered: dict[str, type[T]] = {}
        self._table: dict[str, str] | None = None

    def register(self, cls: type[T], name: str | None = None) -> type[T]:
        """Register ``cls`` in this process as ``name`` (default its class name); returns it."""
        self._registered[name or cls.__name__] = cls
        return cls

    def unregister(self, name: str) -> None:
        self._registered.pop(name, None)

    def _targets(self) -> dict[str, str]:
        if self._table is None:  # entry points are scanned once: the scan reads every installed distribution
            self._table = dict(self._builtin)
            if self._group is not None:
                for ep in entry_points(group=self._group):
                    self._table.setdefault(ep.name, ep.value)
        return self._table

    def names(self) -> list[str]:
        """Every name a spec may give (aliases not included)."""
        return sorted({*self._targets(), *self._registered})

    def known(self, name: str) -> bool:
        return self._aliases.get(name, name) in self._registered or self._aliases.get(name, name) in self._targets()

    def resolve(self, name: str) -> type[T]:
        """The class registered as ``name`` (or an alias of it).

        Raises:
            SpecError: no such plugin (names the known ones).
        """
        name = self._aliases.get(name, name)
        if name in self._registered:
            return self._registered[name]
        target = self._targets().get(name)
        if target is None:
            raise SpecError(self._unknown(name))
        module_name, _, attr = target.partition(":")
        cls: type[T] = getattr(importlib.import_module(module_name), attr)
        return cls

    def check_name(self, name: str) -> str:
        """``name`` if it is known (a spec field validator).

        Raises:
            ValueError: an unknown name; the message suggests the nearest and lists the known ones.
        """
        if not self.known(name):
            raise ValueError(self._unknown(name))
        return name

    def _unknown(self, name: str) -> str:
        near = difflib.get_close_matches(name, [*self.names(), *self._aliases], n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        return f"unknown {self.kind} {name!r}; {hint}known: {', '.join(self.names())}"

    def config_model(self, name: str) -> type[BaseModel]:
        cls: type = self.resolve(name)
        return config_model(cls)

    def check_config(self, name: str | None, config: Mapping[str, Any]) -> Any:
        """``config`` if the plugin ``name`` accepts it (a spec field validator).

        Args:
            name: the plugin (None: its own check failed, so there is nothing to check against).
            config: what the spec sets for it.

        Raises:
            PydanticCustomError: the first problem, its key under the checked field as ``ctx.key`` (dotted), with the
                nearest declared name for an unknown key.
        """
        if name is None or not self.known(name):
            return config
        return check_config(self.config_model(name), config, f"{self.kind} {name}")


def check_config(model: type[BaseModel], config: Mapping[str, Any], owner: str) -> Any:
    """``config`` if ``model`` accepts it (``owner`` names whose config it is, in messages).

    Raises:
        PydanticCustomError: the first problem, its key under the checked field as ``ctx.key`` (dotted), with the
            nearest declared name for an unknown key.
    """
    try:
        model.model_validate(dict(config))
    except ValidationError as error:
        item = error.errors()[0]
        loc = [str(part) for part in item["loc"]]
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = unknown_key_message(model, loc, owner)
        raise PydanticCustomError("plugin_config", "{message}", {"key": ".".join(loc), "message": message}) from None
    return config


def unknown_key_message(model: type[BaseModel], loc: list[str], owner: str) -> str:
    """Why key ``loc[-1]`` is refused under ``loc[:-1]`` of ``model``: what is there, and the nearest name."""
    known = field_names_at(model, loc[:-1])
    near = difflib.get_close_matches(loc[-1], known, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"{owner} takes no key {loc[-1]!r}; {hint}it takes: {', '.join(known) or 'none'}"


def field_names_at(model: type[BaseModel], path: list[str]) -> list[str]:
    """The field names of the model at ``path`` under ``model``, sorted; [] where the path leads to no model.

    The path goes through nested models, their lists (an index) and tagged unions (the tag, as pydantic's
    error locations name a union member: ``steps.0.run.num_steps``).
    """
    here: Any = model
    for part in path:
        members = [m for m in _models_in(here) if _tag(m) == part]
        if members:  # a tagged union's member, by its tag
            here = members[0]
        elif part.isdigit():
            args = typing.get_args(here)  # list[Model] -> Model
            here = args[0] if args else None
        elif isinstance(here, type) and issubclass(here, BaseModel) and part in here.model_fields:
            here = here.model_fields[part].annotation
            found = _models_in(here)
            here = found[0] if len(found) == 1 and typing.get_origin(here) is not list else here
        else:
            return []
    return sorted(here.model_fields) if isinstance(here, type) and issubclass(here, BaseModel) else []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models of a union (``Model | None``, an annotated union), or the model itself."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += [m for m in _models_in(arg) if m not in found] if typing.get_origin(annotation) is not list else []
    return found


def _tag(model: type[BaseModel]) -> Any:
    field = model.model_fields.get("type")
    return field.default if field is not None else None


@cache
def config_model(cls: type) -> type[BaseModel]:
    """The ``Config`` of a plugin class: the one it (or a base) declares, else one made from the keyword parameters
    of its constructor, with their annotations and defaults (a constructor taking ``**kwargs`` accepts any key)."""
    declared = getattr(cls, "Config", None)
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared
    try:
        hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    except Exception:  # noqa: BLE001 - a name only imported for type checking: that parameter is checked as Any
        hints = {}
    fields: dict[str, Any] = {}
    extra = "forbid"
    for param in list(inspect.signature(cls).parameters.values()):
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
        elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (hints.get(param.name, Any), default)
    config = ConfigDict(extra=extra, arbitrary_types_allowed=True)  # type: ignore[typeddict-item]
    model: type[BaseModel] = create_model(f"{cls.__name__}Config", __config__=config, **fields)
    return model
