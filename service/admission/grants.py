"""Credentials belong to the server: the endpoints and key variables a spec may name over REST.

A spec names an LLM endpoint (``base_url``) and the *name* of an environment variable holding its
key (``api_key_env``); a worker then sends that variable's value to that URL. Over REST the spec's
author is not the machine's user, so a spec may name only what the grants file
(``POLIS_GRANTS``) grants its owner, per owner or for every owner (``"*"``)::

    {"credentials": {"*": {"openai": {"api_key_env": "OPENAI_API_KEY", "models": ["openai/*"]}},
                     "lab-a": {"vllm": {"base_url": "http://gpu1:8000/v1", "api_key_env": "VLLM_KEY"}}},
     "quotas": {"lab-a": {"max_agents": 5000}}}

The rule, for every LLM config a run can use (``llm.default``, ``llm.coder``, each sweep cell's,
and ``environment.embedder``): it is free when it calls no provider (a ``sim/*`` or ``local/*``
model, no ``base_url``, no ``api_key_env``; the ``sim``, ``wordllama`` and ``auto`` embedders);
otherwise it must match one grant of its owner: the same ``base_url`` (None matches None), the
same ``api_key_env`` or none (with a ``base_url``, none sends no key), a model the grant's
``models`` patterns allow (any when unset), and only request options of :data:`REQUEST_OPTIONS`
(others, such as litellm's ``api_base``, would redirect the key). A config without ``base_url`` and
without ``api_key_env`` lets the provider library read its default variable (``OPENAI_API_KEY``
...), so it matches only a grant that names neither. The CLI does not check grants: its user owns
the machine's environment.

A grant binds its key to where it may go: a ``base_url``, or (without one) ``models`` patterns that each
start with a provider (``openai/*``). A grant with neither is refused when the service loads the file,
since litellm would send the key to whatever provider a spec's model string names.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.api import ExperimentSpec, LLMClientSpec, LLMSpec, check_grid_keys, format_validation_error
from engine.errors import SpecError
from service.admission.quotas import QuotaOverride
from service.errors import AuthConfigError, CredentialNotGrantedError

__all__ = ["FREE_EMBEDDERS", "REQUEST_OPTIONS", "Grant", "Grants", "GrantsFile", "read_grants_file"]

#: Request options a granted config may set: sampling parameters, nothing that names a host or a key.
REQUEST_OPTIONS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "stop", "seed",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "logprobs", "top_logprobs",
    "reasoning_effort",
})
#: Embedders that call no provider (``engine.env.routers.embedding``); any other is a litellm model.
FREE_EMBEDDERS = frozenset({"sim", "wordllama", "auto"})
_FREE_PREFIXES = ("sim/", "local/")


class Grant(BaseModel):
    """One named credential the server grants: an endpoint, a key variable, or both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None  #: the endpoint; None = the provider's own
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  #: the key variable's name
    models: list[str] | None = None  #: fnmatch patterns of the model strings allowed; None = any (with a base_url only)

    @model_validator(mode="after")
    def _bound_to_providers(self) -> Grant:
        # litellm picks the host by the model's provider prefix: a key granted for "any model" with no base_url
        # goes wherever a spec's model string points (hosted_vllm/... sent it to api.openai.com).
        if self.base_url is not None:
            return self
        if not self.models:
            raise ValueError("a grant without base_url must name the providers its key may reach, e.g. "
                             '"models": ["openai/*"]')
        for pattern in self.models:
            provider, slash, _ = pattern.partition("/")
            if not slash or not provider or any(c in provider for c in "*?["):
                raise ValueError(f"models pattern {pattern!r} must start with a provider name and a slash, "
                                 'e.g. "openai/*" or "anthropic/claude-3-*"')
        return self


class GrantsFile(BaseModel):
    """The grants file: credentials and quota overrides, each by owner or ``"*"``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    credentials: dict[str, dict[str, Grant]] = Field(default_factory=dict)
    quotas: dict[str, QuotaOverride] = Field(default_factory=dict)


def read_grants_file(path: Path) -> GrantsFile:
    """Read and validate a grants file.

    Raises:
        AuthConfigError: the file is missing, not JSON, or not of the documented shape.
    """
    try:
        return GrantsFile.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AuthConfigError(f"POLIS_GRANTS names {path}, which does not exist") from None
    except (OSError, ValidationError) as error:
        raise AuthConfigError(f"the grants file {path} is not valid: {error}") from error


def _is_free(client: LLMClientSpec) -> bool:
    return client.model.startswith(_FREE_PREFIXES) and client.base_url is None and client.api_key_env is None


def _key_matches(client: LLMClientSpec, grant: Grant) -> bool:
    if client.api_key_env is not None:
        return client.api_key_env == grant.api_key_env
    # No variable named: with a base_url no key is sent; without one the provider reads its default.
    return client.base_url is not None or grant.api_key_env is None


class Grants:
    """The credentials granted to each owner.

    Args:
        credentials: the grants file's ``credentials``: owner (or ``"*"``) -> name -> grant.
    """

    def __init__(self, credentials: Mapping[str, Mapping[str, Grant]] | None = None) -> None:
        self._credentials = {owner: dict(grants) for owner, grants in (credentials or {}).items()}

    def for_owner(self, owner: str) -> dict[str, Grant]:
        """The grants of ``owner``: every owner's (``"*"``) and its own, its own winning a shared name."""
        return {**self._credentials.get("*", {}), **self._credentials.get(owner, {})}

    def check_client(self, client: LLMClientSpec, owner: str, path: str) -> None:
        """Refuse an LLM config that is neither free nor one of ``owner``'s grants.

        Args:
            client: the config.
            owner: the spec's owner.
            path: where the config sits in the spec, e.g. ``llm.default``.

        Raises:
            CredentialNotGrantedError: naming the field (``llm.default.base_url``, ``.api_key_env``,
                ``.model`` or ``.options.<key>``).
        """
        if _is_free(client):
            return
        grants = self.for_owner(owner)
        granted = "; ".join(f"{name}: {grant.model_dump(exclude_none=True)}" for name, grant in grants.items()) or "none"
        same_url = [g for g in grants.values() if g.base_url == client.base_url]
        if not same_url:
            field = "base_url" if client.base_url is not None else "api_key_env" if client.api_key_env else "model"
            raise CredentialNotGrantedError(
                f"{client.model!r} at {client.base_url or 'its provider'} is not granted to owner {owner!r} "
                f"(granted: {granted}); sim/* and local/* models need no grant",
                path=f"{path}.{field}",
            )
        keyed = [g for g in same_url if _key_matches(client, g)]
        if not keyed:
            variables = sorted({g.api_key_env for g in same_url if g.api_key_env})
            if client.api_key_env is None:
                problem = "without api_key_env the provider would read its default key variable, which is not granted"
            else:
                problem = f"{client.api_key_env!r} is not granted to owner {owner!r} for {client.base_url or 'this provider'}"
            raise CredentialNotGrantedError(
                f"{problem}; name one of the granted variables {variables} (granted: {granted})",
                path=f"{path}.api_key_env",
            )
        if not any(g.models is None or any(fnmatchcase(client.model, p) for p in g.models) for g in keyed):
            raise CredentialNotGrantedError(
                f"model {client.model!r} is not granted to owner {owner!r} with this endpoint and key (granted: {granted})",
                path=f"{path}.model",
            )
        for field, options in (("options", client.options), ("extra", client.extra)):
            for option in options:
                if option not in REQUEST_OPTIONS:
                    raise CredentialNotGrantedError(
                        f"option {option!r} is not a request option a service run may set "
                        f"(allowed: {', '.join(sorted(REQUEST_OPTIONS))})",
                        path=f"{path}.{field}.{option}",
                    )

    def check_embedder(self, embedder: str, owner: str, path: str = "environment.embedder") -> None:
        """Refuse an embedder that calls a provider unless a grant lets the provider read its default key.

        Raises:
            CredentialNotGrantedError: naming ``path``.
        """
        if embedder in FREE_EMBEDDERS:
            return
        as_client = LLMClientSpec.model_construct(model=embedder, base_url=None, api_key_env=None, options={})
        try:
            self.check_client(as_client, owner, path)
        except CredentialNotGrantedError as error:
            raise CredentialNotGrantedError(_message(error), path=path) from None

    def check_spec(self, spec: ExperimentSpec, owner: str) -> None:
        """Check every LLM config a run of ``spec`` can use (each sweep cell's, for a sweep).

        Raises:
            CredentialNotGrantedError: the first config that is not granted; in a sweep cell the
                path is ``sweep.grid.<key>`` of the key that set it.
            SpecError: a sweep value that makes an invalid LLM config (path ``sweep``).
        """
        if spec.sweep is None:
            self._check_configs(spec.llm, spec.environment.embedder, owner)
            return
        for data, keys in _cell_configs(spec):
            try:
                llm = LLMSpec.model_validate(data["llm"])
            except ValidationError as error:
                raise SpecError(f"a sweep cell's llm is not valid: {format_validation_error(error)}", path="sweep") from None
            environment = data["environment"]
            embedder = environment.get("embedder", "sim") if isinstance(environment, Mapping) else "sim"
            try:
                self._check_configs(llm, embedder if isinstance(embedder, str) else "sim", owner)
            except CredentialNotGrantedError as error:
                key = next((k for k in keys if _covers(k, error.path)), None)
                if key is None:
                    raise
                raise CredentialNotGrantedError(f"in a sweep cell: {_message(error)}", path=f"sweep.grid.{key}") from None

    def _check_configs(self, llm: LLMSpec, embedder: str, owner: str) -> None:
        self.check_client(llm.default, owner, "llm.default")
        if llm.coder is not None:
            self.check_client(llm.coder, owner, "llm.coder")
        self.check_embedder(embedder, owner)


def _message(error: CredentialNotGrantedError) -> str:
    return str(error).removeprefix(f"{error.path}: ")


def _relevant(key: str) -> bool:
    return key.split(".")[0] == "llm" or key == "environment" or key.startswith("environment.embedder")


def _covers(key: str, path: str) -> bool:
    """Whether grid key ``key`` sets (part of) the field at ``path``."""
    key_parts, path_parts = key.split("."), path.split(".")
    return all(k == p or k == "*" for k, p in zip(key_parts, path_parts, strict=False))


def _cell_configs(spec: ExperimentSpec) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """The LLM-relevant part of every distinct cell (``llm`` and ``environment`` as data), with the keys that vary it."""
    assert spec.sweep is not None
    grid = {key: values for key, values in spec.sweep.grid.items() if _relevant(key)}
    # Only the embedder of the environment matters here (a whole swept environment replaces it).
    base: dict[str, Any] = {"llm": spec.llm.model_dump(mode="json"), "environment": {"embedder": spec.environment.embedder}}
    if not grid:
        yield base, []
        return
    targets = check_grid_keys(grid, {"llm": spec.llm, "environment": spec.environment}, field_names=ExperimentSpec.model_fields)
    distinct = [list({json.dumps(v, default=str): v for v in values}.values()) for values in grid.values()]
    for combo in itertools.product(*distinct):
        data = copy.deepcopy(base)
        for key, value in zip(grid, combo, strict=True):
            for target in targets[key]:
                node: Any = data
                for segment in target[:-1]:
                    node = node[segment]
                node[target[-1]] = copy.deepcopy(value)
        yield data, list(grid)
