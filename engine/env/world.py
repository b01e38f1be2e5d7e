"""The world description: a short paragraph about the environment, written once per run by the LLM.

The routers' prompts and the agents' system prompt open with it. The env actor asks the routing
LLM for it once, from the modules' tool listing, and keeps it in the run directory
(:attr:`RunLayout.world_description`): a resumed run, or an actor rebuilt after its worker died,
reads the file instead of asking again. Without an LLM, or when the call fails after the LLM
stack's retries, the description is the deterministic one built from the listing, and the file
says so (``source`` and ``error``): a fallback is never presented as the LLM's text.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from engine.env.base import EnvBase
from engine.env.prompts import WORLD_DESCRIPTION
from engine.env.tool import ToolInfo
from engine.errors import LLMError
from engine.llm.protocol import ChatModel
from engine.storage.run_layout import WORLD_DESCRIPTION_FILE
from engine.storage.store import Store

__all__ = ["WorldDescription", "describe_world", "listing_description", "load_or_describe", "tool_listing"]

log = logging.getLogger(__name__)

#: The longest description kept: a longer answer is cut at its last sentence end before this.
MAX_CHARS = 600

WorldSource = Literal["llm", "listing", "fallback"]


@dataclass(frozen=True)
class WorldDescription:
    """A world description and where it came from."""

    text: str
    #: ``llm``: the LLM wrote it; ``listing``: no LLM, built from the tool listing; ``fallback``: the
    #: LLM call failed, built from the tool listing (``error`` says why)
    source: WorldSource
    listing_hash: str  #: the tool listing it describes (a cached file for other tools is not reused)
    prompt: str | None = None  #: ``name@hash`` of the prompt, when the LLM was asked
    error: str | None = None  #: why the LLM's answer is not used

    def dump(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, saved: dict[str, Any]) -> WorldDescription:
        return cls(saved["text"], saved["source"], saved["listing_hash"], saved.get("prompt"), saved.get("error"))


def _signature(info: ToolInfo) -> str:
    """``change_weather(weather, temperature=None, location=None)``: the caller's ``agent_id`` left out."""
    params = [name if field.is_required() else f"{name}={field.default!r}"
              for name, field in info.args_model.model_fields.items() if name != "agent_id"]
    return f"{info.name}({', '.join(params)})"


def tool_listing(modules: Sequence[EnvBase]) -> str:
    """Each module with its description and its tools' signatures and descriptions (what the LLM reads)."""
    blocks = []
    for module in modules:
        tools = [f"  - {_signature(info)}: {info.description}" for info in module.tools().values() if not info.experimenter]
        blocks.append("\n".join([f"- {module.name}: {module.description()}", *tools]))
    return "\n".join(blocks)


def listing_description(modules: Sequence[EnvBase]) -> str:
    """The deterministic description: the modules and what they are for.

    Tool names stay out of it: a readonly ask's prompt must not name the mutating tools.
    """
    described = "; ".join(f"{m.name}: {m.description()}" for m in modules)
    return f"A simulated society. Environment modules: {described}. Use ask_env with a plain-language instruction to observe or act in it."


def _listing_hash(listing: str) -> str:
    return hashlib.sha256(listing.encode()).hexdigest()[:16]


def _shortened(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_CHARS:
        return text
    cut = text[:MAX_CHARS]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    return cut[: end + 1] if end > 0 else cut.rstrip() + "..."


async def describe_world(modules: Sequence[EnvBase], llm: ChatModel | None) -> WorldDescription:
    """Ask ``llm`` (once; its stack retries transient failures) for the description of ``modules``.

    Returns:
        The LLM's description, or the listing's with ``source`` ``listing`` (no LLM) or
        ``fallback`` (the call failed or answered nothing; ``error`` says which).
    """
    listing = tool_listing(modules)
    digest = _listing_hash(listing)
    if llm is None:
        return WorldDescription(listing_description(modules), "listing", digest)
    messages = [{"role": "user", "content": WORLD_DESCRIPTION.render(listing=listing)}]
    try:
        result = await llm.complete(messages, prompt=WORLD_DESCRIPTION.id)
    except LLMError as error:  # recorded in llm_calls by the metered stack; the run goes on with the listing
        log.warning("world description: the LLM call failed, using the tool listing's: %s", error)
        return WorldDescription(listing_description(modules), "fallback", digest, WORLD_DESCRIPTION.id, f"{type(error).__name__}: {error}"[:500])
    text = _shortened(result.text or "")
    if not text:
        return WorldDescription(listing_description(modules), "fallback", digest, WORLD_DESCRIPTION.id, "the LLM answered with no text")
    return WorldDescription(text, "llm", digest, WORLD_DESCRIPTION.id)


async def load_or_describe(run: Store | None, modules: Sequence[EnvBase], llm: ChatModel | None) -> WorldDescription:
    """The description the run keeps when it describes these tools; else a new one, kept there.

    Args:
        run: the run's store (the description is its key ``env/_world_description.json``); None keeps nothing.
        modules: the run's env modules.
        llm: the routing model (metered), or None.
    """
    if run is not None:
        saved = run.get_json(WORLD_DESCRIPTION_FILE, None)
        if saved is not None and saved.get("listing_hash") == _listing_hash(tool_listing(modules)):
            return WorldDescription.load(saved)
    described = await describe_world(modules, llm)
    if run is not None:
        run.set_json(WORLD_DESCRIPTION_FILE, described.dump(), indent=2)
    return described
