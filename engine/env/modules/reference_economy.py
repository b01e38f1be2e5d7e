"""PersonEconomySpace: EconomySpace with the reference system's per-person tools.

The reference's ``EconomySpace`` keeps one record per person and offers ``get_person`` (its
observation), ``get_currency`` / ``add_currency``, ``get_skill`` / ``set_skill``,
``get_consumption`` / ``set_consumption`` and ``get_income`` / ``set_income``. Here a person's
currency is their EconomySpace cash, so ``add_currency`` moves the same balance that ``buy``,
``work`` and ``transfer`` move; skill, consumption and income are plain records (setting income
pays nothing: salaries and work do). The tools live in a module of their own so that specs naming
``EconomySpace`` keep exactly its tools (and the runs a seed reproduces stay as they were).

As in EconomySpace, changes are queued and applied at the tick's env step in (agent id, call
order) order: the getters show the start-of-tick record and what the caller queued. A negative
``add_currency`` is an outflow, checked like a purchase, so settlement never overdraws; a positive
one counts from the next step. Settled currency changes appear in ``economy_transactions`` with
kind ``add_currency``.
"""

from __future__ import annotations

import math
from typing import Any

from engine.env.modules.economy import EconomySpace, _money
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError

__all__ = ["PersonEconomySpace"]

#: the per-person records besides currency, and their value for a person no one has set
_FIELDS = {"skill": 0.0, "consumption": 0.0, "income": 0.0}
_PERSON_KEYS = {"id", "currency", *_FIELDS}


class PersonEconomySpace(EconomySpace):
    """An economy of persons: each has currency (their cash), a skill, a consumption and an income record, and can work, buy, save and pay.

    A person reads their record (``get_person``) and each part of it, adds to or takes from their
    currency, and sets their skill, consumption and income; every change takes effect at the end
    of the current step. The EconomySpace tools (work, buy, transfer, bank) stay available.

    Args:
        people: initial persons, each ``{id, currency?, skill?, consumption?, income?}``; currency
            is the opening cash (the others default to 0).
        accounts: as EconomySpace (a person given in both is refused).
        **EconomySpace's other kwargs**: default_balance, salaries, hourly_wage, max_hours_per_step,
            goods, price_adjustment, target_demand, min_price, interest_rate.
    """

    def __init__(
        self,
        people: list[dict[str, Any]] | None = None,
        accounts: dict[int, float] | None = None,
        default_balance: float = 100.0,
        salaries: dict[int, float] | None = None,
        hourly_wage: float = 15.0,
        max_hours_per_step: float = 8.0,
        goods: dict[str, float] | None = None,
        price_adjustment: float = 0.0,
        target_demand: float = 1.0,
        min_price: float = 0.01,
        interest_rate: float = 0.0,
    ) -> None:
        opening = {int(k): float(v) for k, v in (accounts or {}).items()}
        records: dict[int, dict[str, float]] = {}
        for i, person in enumerate(people or []):
            where = f"PersonEconomySpace people[{i}]"
            if not isinstance(person, dict) or not isinstance(person.get("id"), int):
                raise SpecError(f"{where}: a person is {{id, currency?, skill?, consumption?, income?}} with an integer id")
            if unknown := sorted(set(person) - _PERSON_KEYS):
                raise SpecError(f"{where}: unknown keys {unknown}; a person takes {sorted(_PERSON_KEYS)}")
            pid = person["id"]
            if pid in records or (pid in opening and "currency" in person):
                raise SpecError(f"{where}: person {pid} is given twice (in people or accounts)")
            values = {key: float(person[key]) for key in _PERSON_KEYS - {"id"} if key in person}
            if any(not math.isfinite(v) or v < 0 for v in values.values()):
                raise SpecError(f"{where}: currency, skill, consumption and income must be finite and not negative")
            if "currency" in values:
                opening[pid] = values.pop("currency")
            records[pid] = {**_FIELDS, **values}
            opening.setdefault(pid, float(default_balance))
        super().__init__(accounts=opening, default_balance=default_balance, salaries=salaries, hourly_wage=hourly_wage,
                         max_hours_per_step=max_hours_per_step, goods=goods, price_adjustment=price_adjustment,
                         target_demand=target_demand, min_price=min_price, interest_rate=interest_rate)
        #: skill, consumption and income by person; a person with an account and no entry has the defaults
        self._people: dict[int, dict[str, float]] = records

    # ---- reading -----------------------------------------------------------------------------
    def _record(self, agent_id: int) -> dict[str, float]:
        self._account(agent_id)  # refuses a person without an account
        return self._people.get(agent_id, _FIELDS)

    def _pending(self, agent_id: int, key: str) -> str:
        """`` (set to X at the end of this step)`` when the caller queued a new value for ``key``."""
        queued = [u["value"] for u in self.updates.of(agent_id) if u["kind"] == "set" and u["field"] == key]
        return f" (set to {queued[-1]:g} at the end of this step)" if queued else ""

    def _currency(self, agent_id: int) -> str:
        cash, available = self._account(agent_id)["cash"], self._available_cash(agent_id)
        added = sum(u["amount"] for u in self.updates.of(agent_id) if u["kind"] == "add_currency" and u["amount"] > 0)
        line = f"currency ${cash:.2f} (${available:.2f} available this step"
        return line + (f"; +${added:.2f} arrives at the end of this step)" if added else ")")

    @tool(readonly=True, kind="observe")
    def get_person(self, agent_id: int) -> str:
        """Show agent_id's economic record: currency, skill, consumption and income."""
        if agent_id not in self._accounts:
            return "You have no record in the economy."
        record = self._record(agent_id)
        return (f"Your economic record: {self._currency(agent_id)}; skill {record['skill']:g}{self._pending(agent_id, 'skill')}; "
                f"consumption ${record['consumption']:.2f}{self._pending(agent_id, 'consumption')}; "
                f"income ${record['income']:.2f}{self._pending(agent_id, 'income')}.")

    @tool(readonly=True)
    def get_currency(self, agent_id: int) -> str:
        """Show how much currency (cash) agent_id has."""
        return f"Your {self._currency(agent_id)}."

    @tool(readonly=True)
    def get_skill(self, agent_id: int) -> str:
        """Show agent_id's skill."""
        return f"Your skill is {self._record(agent_id)['skill']:g}{self._pending(agent_id, 'skill')}."

    @tool(readonly=True)
    def get_consumption(self, agent_id: int) -> str:
        """Show agent_id's consumption record."""
        return f"Your consumption is ${self._record(agent_id)['consumption']:.2f}{self._pending(agent_id, 'consumption')}."

    @tool(readonly=True)
    def get_income(self, agent_id: int) -> str:
        """Show agent_id's income record."""
        return f"Your income is ${self._record(agent_id)['income']:.2f}{self._pending(agent_id, 'income')}."

    # ---- changing ----------------------------------------------------------------------------
    @tool(readonly=False)
    def add_currency(self, agent_id: int, amount: float) -> str:
        """Add amount to your currency (negative to take it away); effective at the end of this step."""
        self._account(agent_id)
        if not math.isfinite(amount) or abs(_money(amount)) < 0.01:
            raise ValueError(f"amount must be at least $0.01 either way, got {amount}")
        amount = _money(amount)
        if amount < 0:
            self._spend(agent_id, -amount, "taking currency away")
        self._queue("add_currency", agent_id, amount)
        return f"currency change of {amount:+.2f} queued for the end of this step"

    def _set(self, agent_id: int, key: str, value: float) -> str:
        self._account(agent_id)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{key} must be a finite number, not negative; got {value}")
        value = float(value) if key == "skill" else _money(value)
        self.updates.queue(agent_id, kind="set", field=key, value=value)
        return f"{key} will be {value:g} from the end of this step"

    @tool(readonly=False)
    def set_skill(self, agent_id: int, skill: float) -> str:
        """Set your skill (effective at the end of this step)."""
        return self._set(agent_id, "skill", skill)

    @tool(readonly=False)
    def set_consumption(self, agent_id: int, consumption: float) -> str:
        """Set your consumption record (effective at the end of this step)."""
        return self._set(agent_id, "consumption", consumption)

    @tool(readonly=False)
    def set_income(self, agent_id: int, income: float) -> str:
        """Set your income record (effective at the end of this step; it pays nothing by itself)."""
        return self._set(agent_id, "income", income)

    # ---- the step and persistence ------------------------------------------------------------
    def _available_cash(self, agent_id: int) -> float:
        taken = sum(-u["amount"] for u in self.updates.of(agent_id) if u["kind"] == "add_currency" and u["amount"] < 0)
        return _money(super()._available_cash(agent_id) - taken)

    def _describe(self, op: Update) -> str:
        if op["kind"] == "set":
            return f"set {op['field']} to {op['value']:g}"
        if op["kind"] == "add_currency":
            return f"currency {op['amount']:+.2f}"
        return super()._describe(op)

    def apply_update(self, update: Update) -> None:
        """Apply a record change or a currency change; everything else as EconomySpace does."""
        kind, agent_id = update["kind"], update.agent_id
        if kind == "set":
            self._people.setdefault(agent_id, dict(_FIELDS))[update["field"]] = update["value"]
        elif kind == "add_currency":
            account = self._accounts[agent_id]
            account["cash"] = _money(account["cash"] + update["amount"])
            self._settling["transactions"].append({"agent_id": agent_id, **{k: update[k] for k in ("kind", "good", "quantity", "amount", "to_agent_id")}})
        else:
            super().apply_update(update)

    def dump_state(self) -> dict[str, Any]:
        return {**super().dump_state(), "people": {str(k): v for k, v in self._people.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        self._people = {int(k): dict(v) for k, v in state.get("people", {}).items()}
        super().load_state(state)
