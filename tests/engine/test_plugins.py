"""The one plugin registry: names, aliases, process registrations, and each plugin's Config checked with suggestions."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from engine.errors import SpecError
from engine.plugins import PluginRegistry, config_model, field_names_at


class Typed:
    """A plugin without a declared Config: its constructor's keyword parameters are its config."""

    def __init__(self, groups: dict[str, list[int]] | None = None, limit: int = 5, *, name: str = "x") -> None:
        self.groups, self.limit, self.name = groups, limit, name


class Open:
    def __init__(self, size: int = 1, **rest: Any) -> None:
        self.size, self.rest = size, rest


class Declared:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        rate: float = Field(0.5, ge=0, le=1)


REGISTRY: PluginRegistry[object] = PluginRegistry("widget", {"Typed": "tests.engine.test_plugins:Typed"},
                                                  aliases={"typed": "Typed"})
REGISTRY.register(Open)
REGISTRY.register(Declared, "Declared")


def test_names_come_from_builtins_and_registrations_and_aliases_resolve() -> None:
    assert REGISTRY.names() == ["Declared", "Open", "Typed"]
    assert REGISTRY.resolve("typed") is REGISTRY.resolve("Typed") is Typed
    assert REGISTRY.known("typed") and not REGISTRY.known("Tiped")


def test_an_unknown_name_suggests_the_nearest_and_lists_the_known() -> None:
    with pytest.raises(SpecError, match=r"unknown widget 'Tiped'; did you mean 'Typed'\? known: Declared, Open, Typed"):
        REGISTRY.resolve("Tiped")
    with pytest.raises(ValueError, match="did you mean 'Declared'"):
        REGISTRY.check_name("Declard")


def test_a_config_is_made_from_the_typed_constructor_when_the_class_declares_none() -> None:
    model = config_model(Typed)
    assert set(model.model_fields) == {"groups", "limit", "name"}
    assert REGISTRY.check_config("Typed", {"groups": {"a": [1, 2]}, "limit": 3}) == {"groups": {"a": [1, 2]}, "limit": 3}
    with pytest.raises(PydanticCustomError) as typo:
        REGISTRY.check_config("Typed", {"grups": {}})
    assert typo.value.context is not None and typo.value.context["key"] == "grups"
    assert typo.value.message() == "widget Typed takes no key 'grups'; did you mean 'groups'? it takes: groups, limit, name"
    with pytest.raises(PydanticCustomError) as wrong_type:
        REGISTRY.check_config("Typed", {"limit": "many"})
    assert wrong_type.value.context is not None and wrong_type.value.context["key"] == "limit"
    assert "integer" in wrong_type.value.message()


def test_a_constructor_taking_kwargs_accepts_any_key_but_still_types_its_named_ones() -> None:
    assert REGISTRY.check_config("Open", {"size": 2, "anything": True}) == {"size": 2, "anything": True}
    with pytest.raises(PydanticCustomError):
        REGISTRY.check_config("Open", {"size": "big"})


def test_a_declared_config_is_the_one_checked() -> None:
    assert config_model(Declared) is Declared.Config
    with pytest.raises(PydanticCustomError) as out_of_range:
        REGISTRY.check_config("Declared", {"rate": 2})
    assert "less than or equal to 1" in out_of_range.value.message()


def test_an_unknown_plugin_is_left_to_the_name_check() -> None:
    assert REGISTRY.check_config("Nope", {"x": 1}) == {"x": 1}
    assert REGISTRY.check_config(None, {"x": 1}) == {"x": 1}


def test_field_names_are_found_through_lists_optionals_and_tagged_unions() -> None:
    from engine.spec import ExperimentSpec

    assert "num_steps" in field_names_at(ExperimentSpec, ["steps", "0", "run"])
    assert "max_calls" in field_names_at(ExperimentSpec, ["budget"])
    assert "kwargs" in field_names_at(ExperimentSpec, ["environment", "modules", "0"])
    assert field_names_at(ExperimentSpec, ["name"]) == []
