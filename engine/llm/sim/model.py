"""The simulated LLM: OpenAI chat completions and embeddings, answered deterministically.

``SimLLM`` is sans-IO: no asyncio, sockets or disk. Its answer is a pure function of the sim's
``(name, seed)`` and the parts of the request that matter (messages, response_format, tools,
tool_choice, the request's own ``seed``). Structured requests always get schema-valid answers;
plain requests get a sentence or two of readable filler.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from engine.llm.sim.schema_instance import generate_instance
from engine.llm.sim.social import SOCIAL, SocialRates, social_decision, social_rates
from engine.llm.sim.vocabulary import WORDS

__all__ = ["RequestKind", "SimLLM", "request_kind", "validate_request"]

RequestKind = Literal["json_schema", "json_object", "tools", "text"]

#: ``created`` of every completion: fixed so that answers are byte-for-byte reproducible.
CREATED = 1_700_000_000
#: The request fields that decide the answer (``model``, ``temperature`` and limits do not).
SEED_FIELDS = ("messages", "response_format", "tools", "tool_choice", "seed")
_JSON_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": ["string", "integer", "boolean"]},
    "minProperties": 1,
    "maxProperties": 3,
}
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
_TOKEN = re.compile(r"\w+")
#: Only the head of the last user message is scanned for topic words.
_TOPIC_SCAN_CHARS = 2000


def validate_request(request: Any) -> None:
    """Check the shape of a chat-completions request body.

    Args:
        request: the decoded JSON body.

    Raises:
        ValueError: with a message naming the offending field.
    """
    if not isinstance(request, Mapping):
        raise ValueError("request body must be a JSON object")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty array")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValueError(f"messages[{i}] must be an object with a string 'role'")
    if request.get("stream"):
        raise ValueError("'stream': true is not supported by the simulated LLM")
    if request.get("n") not in (None, 1):
        raise ValueError("'n' must be 1 (the simulated LLM returns one choice)")
    request_kind(request)


def request_kind(request: Mapping[str, Any]) -> RequestKind:
    """What kind of answer a request asks for.

    A forced tool call (``tool_choice`` "required" or naming a function) wins; otherwise a
    ``response_format`` of json_schema / json_object; otherwise tools unless ``tool_choice`` is
    "none"; otherwise plain text.

    Raises:
        ValueError: a malformed ``tools``, ``tool_choice`` or ``response_format``.
    """
    tools = request.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(_tool_name(t) for t in tools)):
        raise ValueError("'tools' must be an array of {'type': 'function', 'function': {'name': ...}}")
    choice = request.get("tool_choice")
    if choice is not None and choice not in ("none", "auto", "required") and _choice_name(choice) is None:
        raise ValueError("'tool_choice' must be 'none', 'auto', 'required' or {'type': 'function', ...}")
    wants_tools = bool(tools) and choice != "none"
    fmt = request.get("response_format")
    fmt_type = None
    if fmt is not None:
        fmt_type = fmt.get("type") if isinstance(fmt, Mapping) else None
        if fmt_type not in ("text", "json_object", "json_schema"):
            raise ValueError("'response_format.type' must be 'text', 'json_object' or 'json_schema'")
    if wants_tools and choice not in (None, "auto"):
        return "tools"
    if fmt_type in ("json_schema", "json_object"):
        return fmt_type
    return "tools" if wants_tools else "text"


class SimLLM:
    """A deterministic stand-in for an OpenAI-compatible chat model.

    Args:
        name: the model name it answers as (and part of its seed); ``social`` or ``social:<label>`` answers as
            a social-media user.
        seed: varies every answer; equal ``(name, seed, request)`` give equal answers.
        served_model: the ``model`` every reply names, whatever was requested (None: the requested
            model), as a provider that serves an alias by a dated snapshot does.
        fingerprint: the replies' ``system_fingerprint`` (None: ``sim-<seed>``).
        social: the action rates of ``sim/social`` (:mod:`engine.llm.sim.social`; None: its defaults).
    """

    def __init__(self, name: str = "default", seed: int = 0, *, served_model: str | None = None,
                 fingerprint: str | None = None, social: SocialRates | None = None) -> None:
        self.name = name
        self.social = social_rates(social) if name.partition(":")[0] == SOCIAL else None  # sim/social[:label]
        self.seed = seed
        self.served_model = served_model
        self.fingerprint = fingerprint if fingerprint is not None else f"sim-{seed}"
        self._salt = f"polis-sim\x00{name}\x00{seed}\x00".encode()

    def __repr__(self) -> str:
        return f"SimLLM(name={self.name!r}, seed={self.seed})"

    def complete(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one chat-completions request.

        Args:
            request: an OpenAI chat-completions body (``model``, ``messages``, optional
                ``response_format``, ``tools``, ``tool_choice``, ``seed``, ``max_tokens``, ...).

        Returns:
            An OpenAI ``chat.completion`` response dict.

        Raises:
            ValueError: a malformed request, or a schema no valid instance can be built for.
        """
        validate_request(request)
        kind = request_kind(request)
        try:
            canonical = json.dumps(
                {k: request.get(k) for k in SEED_FIELDS}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"request is not plain JSON: {exc}") from None
        digest = hashlib.sha256(self._salt + canonical.encode()).digest()
        rng = random.Random(int.from_bytes(digest[:16], "big"))
        finish = "stop"
        if kind == "tools":
            call = self._tool_call(request, rng)
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish, produced = "tool_calls", call["function"]["name"] + call["function"]["arguments"]
        else:
            if kind == "json_schema":
                spec = request["response_format"].get("json_schema") or {}
                schema = spec.get("schema", {"type": "object"}) if isinstance(spec, Mapping) else None
                if schema is None:
                    raise ValueError("'response_format.json_schema' must be an object")
                decision = social_decision(request, rng, self.social) if self.social is not None else None
                content = json.dumps(decision if decision is not None else generate_instance(schema, rng), ensure_ascii=False)
            elif kind == "json_object":
                content = json.dumps(generate_instance(_JSON_OBJECT_SCHEMA, rng), ensure_ascii=False)
            else:
                content = self._text(request["messages"], rng)
                limit = request.get("max_completion_tokens") or request.get("max_tokens")
                if isinstance(limit, int) and limit > 0 and _tokens(len(content)) > limit:
                    content, finish = content[: 4 * limit], "length"
            message, produced = {"role": "assistant", "content": content}, content
        prompt_tokens, completion_tokens = _tokens(_prompt_chars(request["messages"])), _tokens(len(produced))
        return {
            "id": f"chatcmpl-sim{digest.hex()[:24]}",
            "object": "chat.completion",
            "created": CREATED,
            "model": self.served_model or request.get("model") or self.name,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def embed(self, texts: list[str], dim: int = 64) -> list[list[float]]:
        """Hashed bag-of-words embeddings: deterministic, L2-normalised, similar texts close.

        Args:
            texts: the texts to embed.
            dim: the vector length.

        Returns:
            One unit vector of length ``dim`` per text.

        Raises:
            ValueError: ``dim`` below 1 or a text that is not a string.
        """
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"embedding dim must be a positive integer, got {dim!r}")
        return [self._embed_one(text, dim) for text in texts]

    def _embed_one(self, text: str, dim: int) -> list[float]:
        if not isinstance(text, str):
            raise ValueError(f"embedding input must be a string, got {type(text).__name__}")
        vec = [0.0] * dim
        for token in _TOKEN.findall(text.lower()) or [""]:
            h = _token_hash(self._salt, token)
            vec[h % dim] += 1.0 if (h >> 40) & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0.0:  # every token cancelled out; fall back to the text's own slot
            vec[_token_hash(self._salt, text) % dim], norm = 1.0, 1.0
        return [x / norm for x in vec]

    def _tool_call(self, request: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
        tools = request["tools"]
        wanted = _choice_name(request.get("tool_choice"))
        if wanted is None:
            tool = rng.choice(tools)
        else:
            tool = next((t for t in tools if _tool_name(t) == wanted), None)
            if tool is None:
                raise ValueError(f"'tool_choice' names {wanted!r}, which is not among 'tools'")
        function = tool["function"]
        params = function.get("parameters") or _EMPTY_PARAMETERS
        arguments = json.dumps(generate_instance(params, rng), ensure_ascii=False)
        return {
            "id": f"call_{rng.getrandbits(96):024x}",
            "type": "function",
            "function": {"name": function["name"], "arguments": arguments},
        }

    def _text(self, messages: list[Mapping[str, Any]], rng: random.Random) -> str:
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), messages[-1])
        seen = _TOKEN.findall(_content_text(last_user.get("content"))[:_TOPIC_SCAN_CHARS].lower())
        topic = list(dict.fromkeys(w for w in seen if len(w) > 3 and w.isalpha()))
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        for word in rng.sample(topic, min(2, len(topic))):
            words.insert(rng.randrange(len(words) + 1), word)
        cut = rng.randint(4, len(words) - 3)
        sentences = [words[:cut], words[cut:]] if rng.random() < 0.5 else [words]
        return " ".join(" ".join(s).capitalize() + "." for s in sentences)


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function") if isinstance(tool, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) and name else None


def _choice_name(choice: Any) -> str | None:
    return _tool_name(choice) if isinstance(choice, Mapping) else None


def _content_text(content: Any) -> str:
    """The text of a message ``content``: a string, or the text parts of a part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _prompt_chars(messages: list[Mapping[str, Any]]) -> int:
    total = 0
    for message in messages:
        total += len(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                total += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    return total


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


@lru_cache(maxsize=65536)
def _token_hash(salt: bytes, token: str) -> int:
    return int.from_bytes(hashlib.blake2b(salt + token.encode(), digest_size=8).digest(), "big")
