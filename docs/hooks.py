"""An mkdocs hook: the reference pages' tables, generated from the code at every build.

A page asks for them with a line ``<!-- generated: NAME -->`` (``GENERATORS``, at the end): ``api``
documents every name of ``polis.__all__`` (mkdocstrings renders each ``:::`` block; ``SphinxRoles``, a
griffe extension, turns the docstrings' Sphinx roles into code spans); ``spec`` is the JSON Schema of
``ExperimentSpec`` (what ``polis spec-schema`` prints) as one table per model; ``settings`` lists every field
of ``EngineSettings`` and ``ServiceSettings`` with its environment variable, read from the classes and their
``#:`` comments; ``datasets`` lists every replay dataset the engine writes, with its columns and what each means.

The spec, settings and datasets tables are also committed, between their mark and ``<!-- end generated -->``, so
that they read on GitHub and in an editor: ``python docs/hooks.py`` (``make reference``) writes them, a test fails
when they are stale, and every build writes them afresh.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
import griffe
from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python
from pydantic_settings import BaseSettings

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_MARK = re.compile(r"^<!-- generated: (\w+) -->$(?:\n.*?^<!-- end generated -->$)?", re.MULTILINE | re.DOTALL)
_END = "<!-- end generated -->"
#: The reference pages whose generated blocks are committed (``python docs/hooks.py`` writes them).
COMMITTED = ("reference/spec.md", "reference/settings.md", "reference/datasets.md")
DOCS = Path(__file__).resolve().parent


def on_page_markdown(markdown: str, page: Page, **kwargs: Any) -> str:
    """Fill each ``<!-- generated: NAME -->`` line (or committed block) of a page with what ``GENERATORS[NAME]`` writes."""
    try:
        return fill_marks(markdown)
    except KeyError as error:
        raise PluginError(f"{page.file.src_uri}: no generator {error} (docs/hooks.py has {', '.join(GENERATORS)})") from None


def fill_marks(markdown: str, *, committed: bool = False) -> str:
    """``markdown`` with each mark's block generated afresh; ``committed``: as kept in the repository (with its end
    mark, so the next write finds it), else as the site shows it.

    Raises:
        KeyError: a mark names no generator.
    """
    def fill(match: re.Match[str]) -> str:
        made = GENERATORS[match.group(1)]()
        return f"<!-- generated: {match.group(1)} -->\n{made}\n{_END}" if committed else made

    return _MARK.sub(fill, markdown)


def stale_pages() -> list[str]:
    """The committed reference pages whose generated blocks differ from what the code generates now."""
    return [page for page in COMMITTED if fill_marks(text := (DOCS / page).read_text(encoding="utf-8"), committed=True) != text]


# ---- Markdown ------------------------------------------------------------------------------------------------

_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
_ROLE = re.compile(r":[a-z]+:`([^`]+)`")  # Sphinx roles in docstrings (:mod:`x`, :class:`X`)


def prose(text: str) -> str:
    """Docstring or comment text as Markdown: roles become code spans; outside code, ``<``, ``*`` and ``|`` are literal."""
    parts = _CODE_SPAN.split(_ROLE.sub(_role_as_code, text))
    for i in range(0, len(parts), 2):  # the even parts lie outside code spans
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*").replace("|", r"\|")
    return "".join(parts)


def cell(text: str) -> str:
    """Text for one table cell: a single line."""
    return " ".join(prose(text).split())


def code(value: str) -> str:
    return f"``{value}``" if "`" in value else f"`{value}`"


def table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(row) + " |" for row in rows), ""]


# ---- the API reference ----------------------------------------------------------------------------------------

#: Names shown first in their section, in this order; the rest follow in ``__all__``'s (alphabetical) order.
_LEADING = ("run", "arun", "submit", "open_run", "connect", "Session", "RunFuture", "Run", "ExperimentSpec", "PolisError")


def api_page() -> str:
    import polis

    sections: dict[str, list[str]] = {"Running": [], "Sessions, runs and results": [], "Specs": [], "Settings": [], "Errors": []}
    for name in sorted(polis.__all__, key=lambda n: (_LEADING.index(n) if n in _LEADING else len(_LEADING), n)):
        obj = getattr(polis, name)
        if not isinstance(obj, type):
            sections["Running"].append(name)
        elif issubclass(obj, BaseException):
            sections["Errors"].append(name)
        elif issubclass(obj, BaseSettings):
            sections["Settings"].append(name)
        elif obj.__module__.startswith("engine.spec"):
            sections["Specs"].append(name)
        else:
            sections["Sessions, runs and results"].append(name)
    lines: list[str] = []
    fields_elsewhere = {"Specs", "Settings"}
    for title, names in sections.items():
        if not names:
            continue
        lines += [f"## {title}", ""]
        for name in names:
            lines += [f"::: polis.{name}", "    options:", "      heading_level: 3"]
            if title in fields_elsewhere:
                lines.append("      members: false")
            lines.append("")
    return "\n".join(lines)


class SphinxRoles(griffe.Extension):
    """Docstrings here use Sphinx roles (``:class:`Run```, ``:meth:`~x.Y.z```) that Google style leaves as text:
    make each a code span of the name as Sphinx would show it."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_role_as_code, obj.docstring.value)


def _role_as_code(match: re.Match[str]) -> str:
    target = match.group(1)
    return code(target[1:].rsplit(".", 1)[-1] if target.startswith("~") else target)


# ---- the spec reference --------------------------------------------------------------------------------------


def spec_page() -> str:
    from engine.spec import ExperimentSpec
    from engine.spec_schema import spec_json_schema

    schema = spec_json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    classes = _model_classes(ExperimentSpec)
    lines: list[str] = []
    for name in _reachable(schema, defs):
        model = schema if name == ExperimentSpec.__name__ else defs[name]
        lines += _model_section(name, model, classes.get(name))
    return "\n".join(lines)


def _model_classes(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model class in ``root``'s field tree, by name (the schema's ``$defs`` keys)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ not in found:
                found[annotation.__name__] = annotation
                for field in annotation.model_fields.values():
                    visit(field.annotation)
        for arg in typing.get_args(annotation):
            visit(arg)

    visit(root)
    return found


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        here = [node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else []
        return here + [ref for key, value in node.items() if key != "discriminator" for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def _reachable(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    """The root model, then every model it uses, breadth first in field order, plugin configs after fields."""
    order = [schema["title"]]
    queue = [schema]
    while queue:
        node = queue.pop(0)  # its fields, then the plugin configs its fields take (engine.spec_schema)
        for ref in _refs([node.get("properties", {}), node.get("allOf", [])]):
            if ref not in order:
                order.append(ref)
                queue.append(defs[ref])
    return order


def _model_section(name: str, model: dict[str, Any], cls: type[BaseModel] | None) -> list[str]:
    lines = [f"## {name} {{#{name}}}", ""]
    if model.get("description"):
        lines += [prose(textwrap.dedent(model["description"])), ""]
    required = set(model.get("required", ()))
    rows = []
    for field, prop in model.get("properties", {}).items():
        rows.append((code(field), _schema_type(prop), _schema_default(field, prop, required, cls), cell(prop.get("description", ""))))
    return lines + table(("field", "type", "default", "description"), rows)


def _link(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    return f"[{name}](#{name})"


def _limits(node: dict[str, Any]) -> list[str]:
    def number(value: Any) -> str:
        return {INT64_MAX: "2⁶³−1", INT64_MIN: "−2⁶³"}.get(value, str(value)) if type(value) is int else str(value)

    marks = {"minimum": "≥", "maximum": "≤", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    out = [f"{mark} {number(node[key])}" for key, mark in marks.items() if key in node]
    for key, what in (("minLength", "length ≥"), ("maxLength", "length ≤"), ("minItems", "items ≥"), ("maxItems", "items ≤")):
        if key in node:
            out.append(f"{what} {node[key]}")
    if "pattern" in node:
        out.append(f"matches {code(node['pattern'])}")
    return out


def _schema_type(node: dict[str, Any]) -> str:
    """A property's type in words, with its limits; a model is a link to its section."""
    if "$ref" in node:
        text = _link(node["$ref"])
    elif "const" in node:
        text = code(json.dumps(node["const"]))
    elif "enum" in node:
        text = " or ".join(code(json.dumps(value)) for value in node["enum"])
    elif "anyOf" in node or "oneOf" in node:
        variants = node.get("anyOf") or node["oneOf"]
        text = " or ".join(_schema_type(variant) for variant in variants)
        if "discriminator" in node:
            text += f", by {code(node['discriminator']['propertyName'])}"
    elif node.get("type") == "array":
        items = node.get("items")
        text = f"list of {_schema_type(items)}" if items else "list"
    elif node.get("type") == "object":
        values = node.get("additionalProperties")
        text = f"mapping of string to {_schema_type(values)}" if isinstance(values, dict) else "mapping"
    elif "type" in node:
        kind = node["type"]
        text = " or ".join(kind) if isinstance(kind, list) else kind
        if "format" in node:
            text += f" ({node['format']})"
    else:
        text = "any value"
    limits = _limits(node)
    return f"{text} ({', '.join(limits)})" if limits else text


def _schema_default(field: str, prop: dict[str, Any], required: set[str], cls: type[BaseModel] | None) -> str:
    if field in required:
        return "required"
    if "default" in prop:
        return code(json.dumps(prop["default"]))
    # A default_factory: the schema leaves it out, so ask the model.
    info = _field_by_alias(cls, field)
    if info is None or info.default_factory is None:
        return ""
    value = info.default_factory()  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return f"[{type(value).__name__}](#{type(value).__name__})'s defaults"
    return code(json.dumps(to_jsonable_python(value)))


def _field_by_alias(cls: type[BaseModel] | None, name: str) -> FieldInfo | None:
    if cls is None:
        return None
    for field_name, info in cls.model_fields.items():
        if name in (field_name, info.alias):
            return info
    return None


# ---- the settings reference ----------------------------------------------------------------------------------


def settings_page() -> str:
    from engine.settings import EngineSettings
    from service.settings import ServiceSettings

    lines: list[str] = []
    for cls in (EngineSettings, ServiceSettings):
        lines += _settings_section(cls)
    return "\n".join(lines)


def _settings_section(cls: type[BaseSettings]) -> list[str]:
    lines = [f"## {cls.__name__} {{#{cls.__name__}}}", ""]
    bases = [base for base in cls.__bases__ if issubclass(base, BaseSettings) and base is not BaseSettings]
    extends = "".join(f", which extends [{base.__name__}](#{base.__name__})" for base in bases)
    lines += [f"{code(f'{cls.__module__}.{cls.__name__}')}{extends}.", "", prose(inspect.getdoc(cls) or ""), ""]
    comments = _field_comments(cls)
    own = [name for name in cls.model_fields if name in vars(cls).get("__annotations__", {})]
    rows = []
    for name in own:
        info = cls.model_fields[name]
        rows.append((code(_env_name(cls, name, info)), code(name), _python_type(info), _python_default(info),
                     cell(comments.descriptions.get(name, ""))))
    lines += table(("variable", "field", "type", "default", "description"), rows)
    return lines + [f"{prose(note)}\n" for note in comments.notes]


def _env_name(cls: type[BaseSettings], name: str, info: FieldInfo) -> str:
    if isinstance(info.validation_alias, str):
        return info.validation_alias
    return (cls.model_config.get("env_prefix", "") + name).upper()


def _python_type(info: FieldInfo) -> str:
    limits = []
    for mark in info.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if isinstance(mark, getattr(annotated_types, attr.capitalize())):
                limits.append(f"{sign} {getattr(mark, attr)}")
    text = code(_annotation(info.annotation))
    return f"{text} ({', '.join(limits)})" if limits else text


def _annotation(annotation: Any) -> str:
    """A type as its source would write it, without module paths."""
    if annotation is type(None):
        return "None"
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(_annotation(arg) for arg in args)
    origin = typing.get_origin(annotation)
    if origin is not None:
        inner = ", ".join("..." if arg is Ellipsis else _annotation(arg) for arg in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def _python_default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, Path):
        return code(str(value))
    if isinstance(value, (tuple, list)) and not value:
        return "none"
    return code(str(value) if isinstance(value, str) else repr(value))


class _Comments(typing.NamedTuple):
    descriptions: dict[str, str]
    #: ``#:`` blocks that name a family of variables (``POLIS_QUOTA_*``): notes over the table
    notes: list[str]


_NAMES = re.compile(r"^((?:POLIS_[A-Z0-9_*]+)(?:\s*,\s*POLIS_[A-Z0-9_*]+)*)(?::\s*|$)")


def _field_comments(cls: type) -> _Comments:
    """Each field's ``#:`` comment: the block above its line and the one at its end.

    A comment may start with the variables it is about (``POLIS_TLS_CA_FILE, POLIS_TLS_CERT: ...``); a field
    without a comment of its own takes the nearest earlier one that names its variable, and a block naming a
    family (``POLIS_QUOTA_*``) is a note on the whole class.
    """
    source = textwrap.dedent(inspect.getsource(cls))
    comments = {tok.start[0]: tok.string[2:].strip() for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT and tok.string.startswith("#:")}
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    descriptions: dict[str, str] = {}
    notes: list[str] = []
    named: list[tuple[list[str], str]] = []  # (variables named, text) of every comment so far
    for stmt in body.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        block, line = [], stmt.lineno - 1
        while line in comments and lines[line - 1].lstrip().startswith("#:"):
            block.insert(0, comments[line])
            line -= 1
        parts = []
        for text in (" ".join(block), comments.get(stmt.lineno, "")):
            match = _NAMES.match(text)
            variables = [name.strip() for name in match.group(1).split(",")] if match else []
            rest = text[match.end():] if match else text
            if any("*" in name for name in variables):
                notes.append(f"{code(', '.join(variables))}: {rest}")
                continue
            if rest:
                named.append((variables, rest))
                parts.append(rest)
        field = stmt.target.id
        if parts:
            descriptions[field] = " ".join(parts)
        else:
            env = _env_name(cls, field, cls.model_fields[field]) if field in getattr(cls, "model_fields", {}) else ""
            earlier = [rest for variables, rest in named if env in variables]
            if earlier:
                descriptions[field] = earlier[-1]
    return _Comments(descriptions, notes)


# ---- the datasets reference ----------------------------------------------------------------------------------


def datasets_page() -> str:
    """Every replay dataset of the engine (each module's schemas, and each env module's), its columns and their meaning."""
    import importlib
    import pkgutil

    import engine
    from engine.env.base import EnvBase
    from engine.storage.catalog import DatasetSchema

    found: dict[str, tuple[DatasetSchema, str]] = {}
    for info in sorted(pkgutil.walk_packages(engine.__path__, "engine."), key=lambda i: i.name):
        if ".sandbox.child" in info.name or info.name.endswith("__main__"):
            continue  # a sandbox child's module, or a script: nothing to read
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, DatasetSchema):
                found.setdefault(value.name, (value, info.name))
            elif isinstance(value, type) and issubclass(value, EnvBase) and value.__module__ == info.name:
                try:
                    schemas = value.replay_datasets()
                except AttributeError:  # a base class (RoundGame) whose subclasses name their datasets
                    continue
                for schema in schemas:
                    found.setdefault(schema.name, (schema, value.__name__))
    lines: list[str] = []
    for name, (schema, source) in sorted(found.items()):
        lines += [f"## `{name}` {{#{name}}}", "", f"{prose(schema.description)} ({schema.kind}; written by `{source}`)", ""]
        lines += table(("column", "type", "meaning"),
                       [(code(c.name), code(c.type), cell(prose(c.description))) for c in schema.columns])
        lines.append("")
    return "\n".join(lines).rstrip()


#: What each ``<!-- generated: NAME -->`` line of a page becomes.
GENERATORS = {"api": api_page, "spec": spec_page, "settings": settings_page, "datasets": datasets_page}


if __name__ == "__main__":  # python docs/hooks.py [--check]: write (or check) the committed reference pages' blocks
    import sys

    if sys.argv[1:] == ["--check"]:  # in a fresh interpreter: a test process may have registered types of its own
        stale = stale_pages()
        print("stale: " + ", ".join(stale) if stale else "the committed reference is current")
        sys.exit(1 if stale else 0)
    for committed_page in COMMITTED:
        path = DOCS / committed_page
        path.write_text(fill_marks(path.read_text(encoding="utf-8"), committed=True), encoding="utf-8")
        print(f"wrote {path}")
