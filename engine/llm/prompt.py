"""Named prompt templates: every LLM call records which template (name and hash) produced it."""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PromptTemplate"]


@dataclass(frozen=True)
class PromptTemplate:
    """A named ``str.format`` template.

    Args:
        name: a stable name, recorded with each call (``person.step.system``).
        text: the template; placeholders are ``{name}``.
    """

    name: str
    text: str
    hash: str = field(init=False)
    fields: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash", hashlib.sha256(self.text.encode()).hexdigest()[:12])
        names = {f for _, f, _, _ in string.Formatter().parse(self.text) if f}
        object.__setattr__(self, "fields", frozenset(names))

    @property
    def id(self) -> str:
        """``name@hash``: what a ChatModel call carries as ``prompt`` and records store."""
        return f"{self.name}@{self.hash}"

    def render(self, **values: Any) -> str:
        """Fill the template.

        Raises:
            KeyError: a placeholder without a value (names it).
        """
        missing = self.fields - values.keys()
        if missing:
            raise KeyError(f"prompt {self.name!r} needs {sorted(missing)}")
        return self.text.format(**values)
