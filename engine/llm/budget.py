"""Budgets: a gate that refuses provider calls beyond an allowance, wrapped around a ChatModel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import BudgetExhaustedError
from engine.llm.protocol import ChatModel, ChatResult

__all__ = ["Allowance", "BudgetGate", "BudgetedModel", "Usage"]


@dataclass(frozen=True)
class Allowance:
    """What a holder (one batch) may still spend; None = unlimited."""

    calls: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass
class Usage:
    """Provider usage (cache hits are free and not counted)."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.tokens += other.tokens
        self.cost_usd += other.cost_usd

    @classmethod
    def of_calls(cls, rows: Iterable[Mapping[str, Any]]) -> Usage:
        """What ``llm_calls`` rows cost the provider: answered calls, tokens and cost of every call
        that was not served from the cache."""
        provider = [r for r in rows if not r.get("cached")]
        return cls(
            calls=sum(1 for r in provider if r.get("status") == "ok"),
            tokens=sum(r["input_tokens"] + r["output_tokens"] for r in provider),
            cost_usd=sum(r.get("cost_usd") or 0.0 for r in provider),
        )


class BudgetGate:
    """Counts provider usage against an :class:`Allowance` shared by every caller holding the gate.

    The driver shares what remains of the run's budget over the holders of one transaction (each
    batch, the env router, the helper), so the holders together never spend more than it.
    """

    def __init__(self, allowance: Allowance) -> None:
        self.allowance = allowance
        self.used = Usage()
        self.in_flight = 0  #: calls admitted and not yet answered (they hold a call of the allowance)
        self.refused = 0  #: calls refused since the allowance was given

    def renew(self, allowance: Allowance) -> None:
        """Start over with ``allowance`` (a long-lived holder's share of the next transaction)."""
        self.allowance = allowance
        self.used = Usage()
        self.refused = 0

    def exhausted(self) -> str | None:
        """Why no further call is allowed, or None (calls in flight count as spent)."""
        a, u = self.allowance, self.used
        if a.calls is not None and u.calls + self.in_flight >= a.calls:
            return f"call budget reached ({u.calls}/{a.calls})"
        if a.tokens is not None and u.tokens >= a.tokens:
            return f"token budget reached ({u.tokens}/{a.tokens})"
        if a.cost_usd is not None and u.cost_usd >= a.cost_usd:
            return f"cost budget reached (${u.cost_usd:.4f}/${a.cost_usd:.4f})"
        return None

    def admit(self) -> None:
        """Take a call from the allowance or refuse.

        Raises:
            BudgetExhaustedError: nothing left.
        """
        reason = self.exhausted()
        if reason is not None:
            self.refused += 1
            raise BudgetExhaustedError(reason)
        self.in_flight += 1

    def settle(self, result: ChatResult | None) -> None:
        """End an admitted call: charge its usage (``None``: it failed, nothing charged)."""
        self.in_flight -= 1
        if result is not None:
            self.charge(result)

    def charge(self, result: ChatResult) -> None:
        if result.cached:
            return
        self.used.calls += 1
        self.used.tokens += result.input_tokens + result.output_tokens
        self.used.cost_usd += result.cost_usd or 0.0


class BudgetedModel:
    """Refuse a call once the gate is exhausted; charge each answered call.

    Raises:
        BudgetExhaustedError: from ``complete`` when the allowance is spent.
    """

    def __init__(self, inner: ChatModel, gate: BudgetGate) -> None:
        self._inner = inner
        self._gate = gate

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self._gate.admit()  # check and reserve in one step: concurrent agents cannot overshoot
        result = None
        try:
            result = await self._inner.complete(messages, **kwargs)
        finally:
            self._gate.settle(result)
        return result
