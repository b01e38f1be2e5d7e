"""The LLM test call: before tick 0 the driver asks each distinct model one tiny question.

A missing key variable, a wrong model name or an endpoint that answers only errors would otherwise
fail every agent-step of the first tick one by one, each after its retries. The driver checks each
model once instead: the key variable is set, and one call (``Reply with OK.``) through the provider's
own stack (retried, timed out; never from the cache) is answered. A model that has answered into the run's
response cache before (a resume, a fork sharing its parent's cache, a rerun pointed at an earlier run's cache) is
not checked again: such a run is often served from the cache alone and must cost no provider call (a key revoked
since then shows as failed calls, retried, counted and bounded by ``max_error_rate``). The simulated LLM in this
process needs no check. A spec turns the check off with ``llm_check: false``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from engine.errors import LLMCallError, PreflightError
from engine.llm.api_key import resolve_api_key
from engine.llm.client import LLMClient
from engine.llm.dispatcher import provider_model
from engine.llm.wrappers.cache import ResponseCache

__all__ = ["TEST_MESSAGES", "check_llms", "models_to_check"]

#: The test call's whole prompt.
TEST_MESSAGES = ({"role": "user", "content": "Reply with OK."},)


def models_to_check(clients: Mapping[str, LLMClient]) -> list[tuple[LLMClient, tuple[str, ...]]]:
    """One client per distinct model (its name, endpoint, key variable and options), with the roles that use it;
    the in-process simulated LLM, and a model that answered into the client's response cache before, left out."""
    found: dict[str, tuple[LLMClient, list[str]]] = {}
    for role, client in clients.items():
        if client.is_sim or (client.cache_dir is not None and ResponseCache(client.cache_dir).vouched(client.identity())):
            continue
        found.setdefault(client.identity(), (client, []))[1].append(role)
    return [(client, tuple(roles)) for client, roles in found.values()]


async def _problem(client: LLMClient, roles: tuple[str, ...]) -> str | None:
    where = f"{client.model}" + (f" at {client.base_url}" if client.base_url else "") + f" (role {', '.join(roles)})"
    try:
        resolve_api_key(client)  # a missing variable is named at once, not after the call's retries
        await provider_model(client).complete(list(TEST_MESSAGES))
    except LLMCallError as error:
        return f"{where}: {error}"
    return None


async def check_llms(clients: Mapping[str, LLMClient]) -> None:
    """Make the test call to every distinct model at once.

    Raises:
        PreflightError: a model's key variable is not set or its call failed; every such model is named.
    """
    checked = models_to_check(clients)
    problems = [p for p in await asyncio.gather(*(_problem(c, roles) for c, roles in checked)) if p is not None]
    if problems:
        raise PreflightError("preflight: the LLM test call failed (a spec skips it with llm_check: false):\n"
                             + "\n".join(f"  {p}" for p in problems))
