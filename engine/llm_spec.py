"""The spec's LLM clients: which model each role talks to, how, and at what price (part of :mod:`engine.spec`)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "COMPLETION_OPTIONS", "DEFAULT_SOCIAL_RATES", "SIM_KINDS", "LLMClientSpec", "LLMSpec", "PriceSpec", "SimName", "check_sim_extra",
    "parse_sim_name", "social_rates",
]

#: The chat-completion parameters ``options`` may set (OpenAI's, and the sampling ones litellm passes to other
#: providers). Anything else goes under ``extra``, said on purpose, so that a typo (``temprature``) is an error.
COMPLETION_OPTIONS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "stop", "seed", "n",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "logprobs", "top_logprobs",
    "reasoning_effort", "parallel_tool_calls", "user", "timeout", "service_tier",
})
_SECRET_KEYS = frozenset({"api_key", "key", "token", "authorization"})
#: ``sim/social``'s actions per agent step, as probabilities (``extra.social`` sets them); the rest of the time
#: the agent only reads.
DEFAULT_SOCIAL_RATES: dict[str, float] = {
    "post": 0.2, "repost": 0.25, "like": 0.2, "comment": 0.05, "follow": 0.05, "unfollow": 0.02}


def social_rates(given: Any) -> dict[str, float]:
    """The rates of ``extra.social`` over :data:`DEFAULT_SOCIAL_RATES`.

    Raises:
        ValueError: an unknown action, a rate outside [0, 1], or rates summing past 1.
    """
    if given is None:
        return dict(DEFAULT_SOCIAL_RATES)
    if not isinstance(given, dict):
        raise ValueError(f"extra.social must map actions ({', '.join(DEFAULT_SOCIAL_RATES)}) to rates, not {given!r}")
    rates = dict(DEFAULT_SOCIAL_RATES)
    for action, rate in given.items():
        if action not in DEFAULT_SOCIAL_RATES:
            near = difflib.get_close_matches(str(action), list(DEFAULT_SOCIAL_RATES), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"extra.social: no action {action!r}{hint}; the actions: {', '.join(DEFAULT_SOCIAL_RATES)}")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise ValueError(f"extra.social.{action}: a rate is a probability in [0, 1], not {rate!r}")
        rates[action] = float(rate)
    if sum(rates.values()) > 1 + 1e-9:
        raise ValueError(f"extra.social: the rates sum to {sum(rates.values()):.3g}, past 1 (one action per step at most)")
    return rates


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PriceSpec(_Frozen):
    """A client's token prices, for estimates of models litellm's price map does not know (or prices otherwise)."""

    input_usd_per_mtok: float = Field(ge=0, description="US dollars per million prompt tokens")
    output_usd_per_mtok: float = Field(ge=0, description="US dollars per million completion tokens")

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        """US dollars for that many tokens."""
        return (input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok) / 1e6


# ---- the simulated LLM's model names --------------------------------------------------------------------------
# ``sim/<kind>`` or ``sim/<kind>:<label>``. The kind decides how the model answers (``default``: schema-driven
# answers, ``social``: a social-media user's actions at ``extra.social``'s rates, ``rehearsal``: a survey's real
# answers with ``extra.rehearse_noise``); the label makes an independent copy of it, answering differently for the
# same request (two tiers of one society, two arms of a comparison: ``sim/default:small``, ``sim/default:large``).
# A name of no kind is refused with the known ones (``sim/socal``: did you mean ``sim/social``?), as is an ``extra``
# key the kind does not read: a misspelled model must never run another one, nor a setting be silently ignored.
#: each kind of simulated model, with the ``extra`` keys it reads
SIM_KINDS: MappingProxyType[str, frozenset[str]] = MappingProxyType({
    "default": frozenset(),
    "social": frozenset({"social"}),
    "rehearsal": frozenset({"rehearse_noise"}),
})

_LABEL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class SimName:
    """A parsed ``sim/`` model name: its kind, and the label of its copy ("" for none)."""

    kind: str
    label: str = ""


def parse_sim_name(name: str) -> SimName:
    """Parse the part of a model string after ``sim/``.

    Raises:
        ValueError: no kind of that name (the message lists the kinds and suggests the nearest), or a bad label.
    """
    kind, colon, label = name.partition(":")
    if kind not in SIM_KINDS:
        near = difflib.get_close_matches(kind, list(SIM_KINDS), n=1, cutoff=0.6)
        hint = f"did you mean 'sim/{near[0]}{colon}{label}'? " if near else ""
        raise ValueError(
            f"no simulated model 'sim/{name}': {hint}the simulated models are "
            f"{', '.join(f'sim/{k}' for k in SIM_KINDS)}, each with an optional ':label' for an independent copy "
            "(sim/default:b)")
    if colon and not _LABEL.match(label):
        raise ValueError(f"'sim/{name}': a label is 1-64 letters, digits, '_', '.' or '-' (sim/{kind}:b)")
    return SimName(kind, label)


def check_sim_extra(name: SimName, extra: dict[str, object]) -> None:
    """Refuse an ``extra`` key that the simulated model ``name`` does not read.

    Raises:
        ValueError: naming the key, the keys this kind reads, and the kind that reads it if another does.
    """
    reads = SIM_KINDS[name.kind]
    for key in extra:
        if key in reads:
            continue
        readers = [f"sim/{kind}" for kind, keys in SIM_KINDS.items() if key in keys]
        elsewhere = f" ({' and '.join(readers)} reads it)" if readers else ""
        known = ", ".join(sorted(reads)) or "none"
        raise ValueError(f"extra.{key}: sim/{name.kind} does not read it{elsewhere}; the keys it reads: {known}")


class LLMClientSpec(_Frozen):
    """One LLM client: a litellm model string (or ``sim/<kind>[:<label>]``), never a key."""

    model: str = Field("sim/default", min_length=1, description="litellm model string, or the simulated LLM: sim/default, "
                       "sim/social or sim/rehearsal, with an optional ':label' for an independent copy (sim/default:b)")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="NAME of the environment variable holding the key (resolved on the worker)",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="chat-completion parameters: temperature, max_tokens, top_p, seed, stop ... "
        "(a name outside them is refused: put a provider's own parameters under extra)")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="a provider's own request parameters, sent as they are (no check beyond secrets)")
    price: PriceSpec | None = Field(
        None, description="token prices for polis estimate and the run's recorded cost_usd (default: litellm's price map)")
    context_window: int | None = Field(
        None, ge=256, le=10_000_000, description="the model's context window in tokens: a call whose prompt (4 characters "
        "a token) and max_tokens would not fit is refused before it is sent, and recorded as a failed call")

    @field_validator("options")
    @classmethod
    def _known_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            _refuse_secret(key)
            if key not in COMPLETION_OPTIONS:
                near = difflib.get_close_matches(key, sorted(COMPLETION_OPTIONS), n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise PydanticCustomError(
                    "unknown_option", "unknown completion option '{name}'; {hint}a provider's own parameter goes under "
                    "'extra' (known options: {known})",
                    {"key": key, "name": key, "hint": hint, "known": ", ".join(sorted(COMPLETION_OPTIONS))})
        return value

    @field_validator("extra")
    @classmethod
    def _no_secret_in_extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            _refuse_secret(key)
        return value

    @model_validator(mode="after")
    def _simulated_model(self) -> LLMClientSpec:
        if self.is_sim:  # a misspelled sim/ name, or an extra key the simulated model never reads, is refused
            name = parse_sim_name(self.model.removeprefix("sim/"))
            check_sim_extra(name, self.extra)
            if name.kind == "social":
                social_rates(self.extra.get("social"))
        return self

    @property
    def is_sim(self) -> bool:
        """Whether this is the built-in simulated LLM (``sim/<kind>`` without a ``base_url``)."""
        return self.model.startswith("sim/") and self.base_url is None

    def request_options(self) -> dict[str, Any]:
        """What every request of this client carries: ``options``, then ``extra``."""
        return {**self.options, **self.extra}


def _refuse_secret(key: str) -> None:
    if key.lower() in _SECRET_KEYS:
        raise ValueError(f"option {key!r} would store a secret in the spec; use api_key_env instead")


class LLMSpec(_Frozen):
    """LLM clients by role. ``coder`` (used by env routers) falls back to ``default``."""

    default: LLMClientSpec = Field(default_factory=LLMClientSpec)
    coder: LLMClientSpec | None = None
