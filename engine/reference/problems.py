"""Problems found in the reference files, each led by its place (``init_config.json:agents.3.kwargs.x``)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from engine.errors import SpecError

__all__ = ["Problems", "at", "mapping", "only"]


class Problems:
    """Problems collected across both files, each with its place, raised together as one SpecError."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, where: str, message: str) -> None:
        self.items.append((where, message))

    def check(self, where: str, adapter: TypeAdapter[Any], value: Any) -> bool:
        """Validate ``value``; add one problem per pydantic error. True when valid."""
        try:
            adapter.validate_python(value)
        except ValidationError as error:
            for item in error.errors():
                self.add(".".join([where, *map(str, item["loc"])]), item["msg"].removeprefix("Value error, "))
            return False
        return True

    def raise_if_any(self) -> None:
        """Raise every problem so far, one per line; the error's ``path`` is the first one's place.

        Raises:
            SpecError: when there is any problem.
        """
        if self.items:
            error = SpecError("\n".join(f"{where}: {message}" for where, message in self.items))
            error.path = self.items[0][0]
            raise error


def at(label: str, *parts: Any) -> str:
    """The place ``label:part.part`` (``label`` alone without parts)."""
    return f"{label}:{'.'.join(map(str, parts))}" if parts else label


def mapping(value: Any, where: str, what: str, problems: Problems) -> dict[str, Any] | None:
    """``value`` as a mapping (absent: empty); None, with a problem, when it is something else."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(where, f"expected a mapping ({what}), got {type(value).__name__}")
        return None
    return value


def only(entry: dict[str, Any], allowed: tuple[str, ...], where: str, problems: Problems) -> None:
    """Refuse keys outside ``allowed``; ``where`` is a file label or a place inside one."""
    for key in entry:
        if key not in allowed:
            problems.add(f"{where}.{key}" if ":" in where else at(where, key), f"unknown key; expected {', '.join(allowed)}")
