"""generate_instance: every instance is valid for its schema, or the schema is refused loudly."""

from __future__ import annotations

import datetime as dt
import enum
import json
import random
import uuid
from typing import Annotated, Any, Literal, Optional, Union

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field, conint, constr

from engine.llm.sim.schema_instance import generate_instance

WORDS = ["alpha", "beta", "gamma", "delta", "omega"]
FORMATS = ["date-time", "date", "time", "uuid", "email", "uri"]


def assert_valid(instance: Any, schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = list(validator.iter_errors(instance))
    assert not errors, f"{json.dumps(instance)} is invalid for {json.dumps(schema)}: {errors[0].message}"


# -- a random schema builder -------------------------------------------------------------------


class SchemaBuilder:
    """Builds satisfiable schemas that cover nesting, refs, unions, enums and bounds."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.defs: dict[str, Any] = {}

    def root(self) -> dict[str, Any]:
        self.defs = {
            "Tree": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                },
                "required": ["value", "children"],
            },
            "Chain": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Chain"}, {"type": "null"}]},
                },
                "required": ["label", "next"],
                "additionalProperties": False,
            },
        }
        for i in range(self.rng.randint(0, 3)):
            self.defs[f"D{i}"] = self.build(2, refs=False)
        schema = self.build(0)
        schema["$defs"] = self.defs
        return schema

    def build(self, depth: int, refs: bool = True) -> dict[str, Any]:
        kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "multi", "empty"]
        if depth < 3:
            kinds += ["object", "object", "array", "tuple", "anyOf", "oneOf", "tagged", "allOf"]
        if refs:
            kinds += ["ref", "ref"]
        return getattr(self, "_" + self.rng.choice(kinds))(depth)

    def _string(self, depth: int) -> dict[str, Any]:
        r = self.rng
        if r.random() < 0.3:
            return {"type": "string", "format": r.choice(FORMATS)}
        schema: dict[str, Any] = {"type": "string"}
        if r.random() < 0.5:
            schema["minLength"] = r.randint(0, 12)
        if r.random() < 0.5:
            schema["maxLength"] = schema.get("minLength", 0) + r.randint(0, 8)
        return schema

    def _bounds(self, schema: dict[str, Any], lo: int) -> dict[str, Any]:
        r, hi = self.rng, lo + self.rng.randint(15, 60)
        if r.random() < 0.6:
            schema["exclusiveMinimum" if r.random() < 0.3 else "minimum"] = lo
        if r.random() < 0.6:
            schema["exclusiveMaximum" if r.random() < 0.3 else "maximum"] = hi
        return schema

    def _integer(self, depth: int) -> dict[str, Any]:
        schema = self._bounds({"type": "integer"}, self.rng.randint(-50, 50))
        if self.rng.random() < 0.3:
            schema["multipleOf"] = self.rng.choice([2, 3, 5, 0.5])
        return schema

    def _number(self, depth: int) -> dict[str, Any]:
        schema = self._bounds({"type": "number"}, self.rng.randint(-50, 50))
        if self.rng.random() < 0.3:
            schema["multipleOf"] = self.rng.choice([0.5, 0.25, 0.1, 3])
        return schema

    def _boolean(self, depth: int) -> dict[str, Any]:
        return {"type": "boolean"}

    def _null(self, depth: int) -> dict[str, Any]:
        return {"type": "null"}

    def _enum(self, depth: int) -> dict[str, Any]:
        pool = [1, 2.5, "x", "y", None, True, False, [1, "a"], {"k": 1}]
        return {"enum": self.rng.sample(pool, self.rng.randint(1, 4))}

    def _const(self, depth: int) -> dict[str, Any]:
        value = self.rng.choice(["fixed", 7, None, {"a": [1, 2]}])
        return {"const": value} if self.rng.random() < 0.5 else {"type": _json_type(value), "const": value}

    def _multi(self, depth: int) -> dict[str, Any]:
        return {"type": self.rng.sample(["string", "integer", "number", "boolean", "null"], 2)}

    def _empty(self, depth: int) -> dict[str, Any]:
        return {}

    def _object(self, depth: int) -> dict[str, Any]:
        r = self.rng
        names = r.sample(WORDS, r.randint(0, 4))
        schema: dict[str, Any] = {"type": "object", "properties": {n: self.build(depth + 1) for n in names}}
        schema["required"] = [n for n in names if r.random() < 0.5]
        extra = r.choice(["absent", False, True, "schema"])
        if extra == "schema":
            schema["additionalProperties"] = self.build(depth + 1)
        elif extra != "absent":
            schema["additionalProperties"] = extra
        if r.random() < 0.3:
            schema["minProperties"] = min(len(names), 2) if extra is False else 2
        return schema

    def _array(self, depth: int) -> dict[str, Any]:
        r = self.rng
        if r.random() < 0.3:
            item = r.choice([{"type": "string"}, {"type": "integer"}, {"enum": ["a", "b", "c", "d"]}])
            return {"type": "array", "items": item, "uniqueItems": True, "minItems": r.randint(0, 3)}
        schema: dict[str, Any] = {"type": "array", "items": self.build(depth + 1)}
        if r.random() < 0.5:
            schema["minItems"] = r.randint(0, 2)
        if r.random() < 0.5:
            schema["maxItems"] = schema.get("minItems", 0) + r.randint(0, 3)
        return schema

    def _tuple(self, depth: int) -> dict[str, Any]:
        prefix = [self.build(depth + 1) for _ in range(self.rng.randint(1, 3))]
        return {"type": "array", "prefixItems": prefix, "items": False, "minItems": len(prefix)}

    def _anyOf(self, depth: int) -> dict[str, Any]:
        return {"anyOf": [self.build(depth + 1) for _ in range(self.rng.randint(1, 3))]}

    def _oneOf(self, depth: int) -> dict[str, Any]:
        types = self.rng.sample(["string", "integer", "number", "boolean", "null", "array"], self.rng.randint(2, 3))
        return {"oneOf": [{"type": t} if t != "array" else {"type": "array", "maxItems": 2} for t in types]}

    def _tagged(self, depth: int) -> dict[str, Any]:
        branches = []
        for tag in self.rng.sample(WORDS, 2):
            body = self._object(depth + 1)
            body["properties"]["kind"] = {"const": tag}
            body["required"] = [*body["required"], "kind"]
            branches.append(body)
        return {"oneOf": branches}

    def _allOf(self, depth: int) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            return {"allOf": [{"type": "integer", "minimum": -10}, {"maximum": 40}, {"multipleOf": 2}]}
        left, right = self.rng.sample(WORDS, 2)
        return {
            "allOf": [
                {"type": "object", "properties": {left: self.build(depth + 1)}, "required": [left]},
                {"type": "object", "properties": {right: self.build(depth + 1)}},
            ]
        }

    def _ref(self, depth: int) -> dict[str, Any]:
        name = self.rng.choice(sorted(self.defs))
        ref: dict[str, Any] = {"$ref": f"#/$defs/{name}"}
        if self.rng.random() < 0.3:
            ref["description"] = "a reference with an annotation beside it"
        return ref


def _json_type(value: Any) -> str:
    return {str: "string", int: "integer", type(None): "null", dict: "object"}[type(value)]


def test_random_schemas_yield_valid_instances() -> None:
    builder = SchemaBuilder(random.Random(20240501))
    for i in range(600):
        schema = builder.root()
        for seed in range(3):
            assert_valid(generate_instance(schema, random.Random(i * 10 + seed)), schema)


def test_same_rng_seed_gives_the_same_instance() -> None:
    schema = SchemaBuilder(random.Random(7)).root()
    assert generate_instance(schema, random.Random(3)) == generate_instance(schema, random.Random(3))


# -- pydantic models ---------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: constr(min_length=3, max_length=20)
    zip: Annotated[int, Field(ge=10000, le=99999)]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: conint(ge=0, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: constr(min_length=1, max_length=12)
    age: conint(ge=0, lt=130)
    mood: Literal["happy", "sad", "calm"]
    nickname: Optional[str] = None  # noqa: UP045 - the Optional spelling is what users write
    address: Address
    previous: list[Address] = []
    scores: dict[str, float]
    keyed: dict[Literal["x", "y"], int] = {}
    tags: set[str]
    pair: tuple[int, str]
    pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]  # noqa: UP007
    color: Color
    born: dt.date
    seen: dt.datetime
    at: dt.time
    uid: uuid.UUID
    ratio: Annotated[float, Field(ge=0, le=1, multiple_of=0.25)]


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Chain(BaseModel):
    label: str
    next: Chain | None = None


@pytest.mark.parametrize("model", [Person, Address, Tree, Chain, Cat])
def test_pydantic_model_instances_validate_with_jsonschema_and_pydantic(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    for seed in range(150):
        instance = generate_instance(schema, random.Random(seed))
        assert_valid(instance, schema)
        model.model_validate_json(json.dumps(instance))


def test_recursive_models_terminate_and_still_nest() -> None:
    schema = Tree.model_json_schema()

    def depth(node: dict[str, Any]) -> int:
        return 1 + max((depth(c) for c in node.get("children", [])), default=0)

    depths = [depth(generate_instance(schema, random.Random(s))) for s in range(200)]
    assert max(depths) > 2


def test_strings_are_readable_words() -> None:
    text = generate_instance({"type": "string", "minLength": 20, "maxLength": 40}, random.Random(1))
    assert 20 <= len(text) <= 40
    assert all(word.isalpha() for word in text.split())


# -- combinators -------------------------------------------------------------------------------


def test_one_of_never_matches_two_branches() -> None:
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    for seed in range(50):
        value = generate_instance(schema, random.Random(seed))
        assert isinstance(value, float) and not value.is_integer()


def test_one_of_with_identical_branches_raises() -> None:
    with pytest.raises(ValueError, match="oneOf"):
        generate_instance({"oneOf": [{"type": "string"}, {"type": "string"}]}, random.Random(0))


def test_any_of_falls_back_from_an_unsupported_branch() -> None:
    schema = {"anyOf": [{"type": "string", "pattern": "^x"}, {"type": "integer"}]}
    assert all(isinstance(generate_instance(schema, random.Random(s)), int) for s in range(20))


def test_all_of_merges_object_branches() -> None:
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"const": "fixed"}}, "required": ["b"]},
        ]
    }
    assert generate_instance(schema, random.Random(0))["b"] == "fixed"


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "string", "pattern": "^[a-z]+$"}, "pattern"),
        ({"not": {"type": "string"}}, "not"),
        ({"if": {"type": "string"}, "then": {"minLength": 3}}, "if"),
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}, "required": ["a"]}, "pattern"),
    ],
)
def test_unsupported_keywords_raise_naming_the_keyword(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(ValueError, match=f"'{keyword}'"):
        generate_instance(schema, random.Random(0))


def test_unsupported_keyword_error_names_the_path() -> None:
    class Coded(BaseModel):
        code: constr(pattern=r"^[A-Z]{3}$")

    with pytest.raises(ValueError, match=r"pattern.*#/properties/code"):
        generate_instance(Coded.model_json_schema(), random.Random(0))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 5, "maximum": 4},
        {"type": "string", "minLength": 5, "maxLength": 2},
        {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 3},
        {"type": "object", "required": ["a"], "additionalProperties": False},
        {"type": "string", "format": "made-up"},
        {"$ref": "https://example.org/schema.json"},
        False,
    ],
)
def test_unsatisfiable_or_unknown_schemas_raise(schema: Any) -> None:
    with pytest.raises(ValueError):
        generate_instance(schema, random.Random(0))


# -- string examples ---------------------------------------------------------------------------


def test_string_examples_are_honoured_and_chosen_by_the_seed() -> None:
    class Decision(BaseModel):
        thought: str
        code: str = Field(examples=["send_message(to_agent_id=1)", "results['a'] = read_inbox()", "join_group('x')"])

    schema = Decision.model_json_schema()
    chosen = {generate_instance(schema, random.Random(seed))["code"] for seed in range(40)}
    assert chosen == set(Decision.model_fields["code"].examples)
    assert generate_instance(schema, random.Random(7)) == generate_instance(schema, random.Random(7))


def test_string_examples_that_break_the_schema_are_not_used() -> None:
    schema = {"type": "string", "maxLength": 5, "examples": ["far too long", 12, "short"]}
    assert {generate_instance(schema, random.Random(seed)) for seed in range(20)} == {"short"}
    unfit = {"type": "string", "minLength": 50, "examples": ["short"]}
    assert all(len(generate_instance(unfit, random.Random(seed))) >= 50 for seed in range(5))
    dated = {"type": "string", "format": "date", "examples": ["not a date"]}
    assert_valid(generate_instance(dated, random.Random(0)), dated)
