"""EconomySpace: accounts, wages and work, a goods market with demand-driven prices, and a bank.

Updates are synchronous, as in MessagingSpace: purchases, payments, deposits, withdrawals and work
made during a tick are queued and settled when the tick's env step runs, in (agent id, call order)
order. A call is refused at once when it would overdraw: outflows are checked against the
start-of-tick balance minus the agent's own queued outflows, and inflows (wages, withdrawals,
payments received) only count from the next step, so settlement never fails and never depends on
how agents were interleaved.

The step settles in this order: interest on the deposits held when the tick began, salaries, the
queued operations, then each good's price moves with the units bought in the step (operations an
intervention settled between ticks count towards the next step)::

    price *= 1 + price_adjustment * clamp((demand - target_demand) / target_demand, -1, 1)

rounded to cents and never below ``min_price``. Money is kept in cents (rounded to 2 decimals).
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from engine.env.base import EnvBase
from engine.env.metrics import gini
from engine.env.modules.economy_datasets import ACCOUNTS, STATE, TRANSACTIONS
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import DatasetSchema

__all__ = ["EconomySpace"]

_DEFAULT_GOODS = {"food": 5.0, "clothing": 20.0, "entertainment": 15.0}
_OUTFLOWS = ("buy", "deposit", "transfer")
#: how each queued operation moves the actor's (cash, deposits), as signs of its amount
_EFFECTS = {"work": (1, 0), "buy": (-1, 0), "transfer": (-1, 0), "deposit": (-1, 1), "withdraw": (1, -1)}

def _money(value: float) -> float:
    return round(value + 0.0, 2)


def _no_flows() -> dict[str, Any]:
    """What a step has done so far: money totals, units sold per good, per-agent flows, transactions."""
    return {"spending": 0.0, "income": 0.0, "interest": 0.0, "demand": {}, "flows": {}, "transactions": []}


class EconomySpace(EnvBase):
    """An economy: agents earn money, buy goods at market prices, save in a bank that pays interest, and pay each other.

    Agents may work for an hourly wage, buy goods (refused when they cannot afford them), deposit
    money in or withdraw it from the bank, and transfer money to other agents. All of it is settled
    at the end of the current step; salaries and interest are paid then too, and prices move with
    demand (they rise when a good sells more than its target, fall when it sells less).

    Args:
        accounts: initial cash by agent id; bound agents without an entry start with ``default_balance``.
        default_balance: starting cash of accounts opened when agents are bound.
        salaries: income paid to an agent every step, by agent id.
        hourly_wage: pay per hour of ``work``.
        max_hours_per_step: most hours an agent may work in one step.
        goods: good -> starting price.
        price_adjustment: how strongly prices react to demand each step (0 keeps prices fixed).
        target_demand: units of a good per step at which its price stays put.
        min_price: the lowest price a good can fall to.
        interest_rate: bank interest per step, e.g. 0.001 for 0.1%.
    """

    METRICS = {
        "gini_wealth": "Gini coefficient of wealth (cash + deposits) over accounts: 0 equal, 1 one holds all",
        "median_wealth": "median wealth (cash + deposits) over accounts, in money",
        "mean_wealth": "mean wealth (cash + deposits) over accounts, in money",
        "total_money": "cash and deposits summed over accounts, in money",
        "spending": "money spent on goods in this step",
        "income": "salaries and wages for work paid in this step",
        "units_sold": "units of goods bought in this step, all goods together",
        "workers": "agents whose work was paid in this step",
        "employment_rate": "share of accounts whose work was paid in this step",
        "hours_worked": "hours of work paid in this step",
        "mean_price": "unweighted mean of the goods' prices after this step's adjustment",
    }

    def __init__(
        self,
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
        super().__init__()
        goods = dict(_DEFAULT_GOODS if goods is None else goods)
        if not goods or any(price <= 0 for price in goods.values()):
            raise SpecError("goods must map at least one good to a positive price")
        if min(default_balance, hourly_wage, max_hours_per_step, price_adjustment, interest_rate) < 0:
            raise SpecError("balances, wages, hours, price_adjustment and interest_rate cannot be negative")
        if target_demand <= 0 or min_price <= 0:
            raise SpecError("target_demand and min_price must be positive")
        self._default_balance = float(default_balance)
        self._salaries = {int(k): float(v) for k, v in (salaries or {}).items()}
        self._wage = float(hourly_wage)
        self._max_hours = float(max_hours_per_step)
        self._adjustment = float(price_adjustment)
        self._target = float(target_demand)
        self._min_price = float(min_price)
        self._rate = float(interest_rate)
        self._prices: dict[str, float] = {name: _money(price) for name, price in goods.items()}
        self._accounts: dict[int, dict[str, Any]] = {}
        for agent_id, cash in (accounts or {}).items():
            self._open(int(agent_id), float(cash))
        #: what the last step did: money totals, units sold per good, per-agent flows, transactions
        self._last: dict[str, Any] = _no_flows()
        #: what the coming step has settled so far (operations an intervention settled, then the step's own)
        self._settling = _no_flows()
        self._spending_total = 0.0
        self._agent_ids: list[int] = []

    def _open(self, agent_id: int, cash: float) -> None:
        self._accounts[agent_id] = {"cash": _money(cash), "deposits": 0.0, "goods": {}}

    def bind_agents(self, agent_ids: list[int]) -> None:
        """Open an account with ``default_balance`` for every agent that has none."""
        self._agent_ids = sorted(agent_ids)
        for agent_id in self._agent_ids:
            if agent_id not in self._accounts:
                self._open(agent_id, self._default_balance)

    # ---- checks and queueing -----------------------------------------------------------------
    def _account(self, agent_id: int) -> dict[str, Any]:
        account = self._accounts.get(agent_id)
        if account is None:
            raise ValueError(f"agent {agent_id} has no account")
        return account

    def _queued(self, agent_id: int, kinds: tuple[str, ...], key: str = "amount") -> float:
        return sum(u[key] for u in self.updates.of(agent_id) if u["kind"] in kinds)

    def _available_cash(self, agent_id: int) -> float:
        return _money(self._account(agent_id)["cash"] - self._queued(agent_id, _OUTFLOWS))

    def _spend(self, agent_id: int, amount: float, what: str) -> None:
        available = self._available_cash(agent_id)
        if amount > available:
            raise ValueError(f"cannot afford {what} for ${amount:.2f}: you have ${available:.2f} available this step")

    @staticmethod
    def _positive(value: float, name: str) -> None:
        if not value > 0:  # also refuses NaN
            raise ValueError(f"{name} must be positive, got {value}")

    @staticmethod
    def _amount(value: float) -> float:
        if not _money(value) >= 0.01:  # also refuses NaN
            raise ValueError(f"amount must be at least $0.01, got {value}")
        return _money(value)

    def _queue(self, kind: str, agent_id: int, amount: float, **extra: Any) -> None:
        self.updates.queue(agent_id, kind=kind, amount=_money(amount), **{"good": None, "quantity": None, "to_agent_id": None, **extra})

    # ---- acting ------------------------------------------------------------------------------
    @tool(readonly=False)
    def work(self, agent_id: int, hours: float) -> str:
        """Work for the hourly wage; the pay arrives at the end of this step."""
        self._account(agent_id)
        self._positive(hours, "hours")
        done = self._queued(agent_id, ("work",), key="quantity")
        if done + hours > self._max_hours:
            raise ValueError(f"you can work at most {self._max_hours:g} hours per step ({done:g} already queued)")
        pay = _money(hours * self._wage)
        self._queue("work", agent_id, pay, quantity=float(hours))
        return f"{hours:g} hours of work queued; you will be paid ${pay:.2f} at the end of this step"

    @tool(readonly=False)
    def buy(self, agent_id: int, good: str, quantity: int) -> str:
        """Buy units of a good at its current price; refused if you cannot afford it."""
        self._account(agent_id)
        if good not in self._prices:
            raise ValueError(f"there is no good {good!r}; goods: {', '.join(sorted(self._prices))}")
        self._positive(quantity, "quantity")
        cost = _money(self._prices[good] * quantity)
        self._spend(agent_id, cost, f"{quantity} {good}")
        self._queue("buy", agent_id, cost, good=good, quantity=float(quantity))
        return f"bought {quantity} {good} for ${cost:.2f} (settled at the end of this step)"

    @tool(readonly=False)
    def transfer(self, agent_id: int, to_agent_id: int, amount: float) -> str:
        """Pay money to another agent; they receive it at the end of this step."""
        self._account(agent_id)
        self._account(to_agent_id)
        if to_agent_id == agent_id:
            raise ValueError("you cannot transfer money to yourself")
        amount = self._amount(amount)
        self._spend(agent_id, amount, f"a transfer to agent {to_agent_id}")
        self._queue("transfer", agent_id, amount, to_agent_id=to_agent_id)
        return f"${amount:.2f} to agent {to_agent_id} queued"

    @tool(readonly=False)
    def deposit(self, agent_id: int, amount: float) -> str:
        """Move cash into your bank deposit, which earns interest every step."""
        self._account(agent_id)
        amount = self._amount(amount)
        self._spend(agent_id, amount, "a deposit")
        self._queue("deposit", agent_id, amount)
        return f"deposit of ${amount:.2f} queued"

    @tool(readonly=False)
    def withdraw(self, agent_id: int, amount: float) -> str:
        """Move money from your bank deposit back to cash (available from the next step)."""
        account = self._account(agent_id)
        amount = self._amount(amount)
        available = _money(account["deposits"] - self._queued(agent_id, ("withdraw",)))
        if amount > available:
            raise ValueError(f"cannot withdraw ${amount:.2f}: you have ${available:.2f} in the bank")
        self._queue("withdraw", agent_id, amount)
        return f"withdrawal of ${amount:.2f} queued"

    # ---- reading -----------------------------------------------------------------------------
    @tool(readonly=True, kind="observe")
    def my_account(self, agent_id: int) -> str:
        """Show agent_id's cash, bank deposits, income, goods owned, queued operations and the market prices."""
        account = self._accounts.get(agent_id)
        if account is None:
            return "You have no account in the economy."
        lines = [
            f"Cash ${account['cash']:.2f} (${self._available_cash(agent_id):.2f} available this step); "
            f"bank deposits ${account['deposits']:.2f} earning {self._rate:.2%} per step.",
            f"Salary ${self._salaries.get(agent_id, 0.0):.2f} per step; work pays ${self._wage:.2f} per hour.",
        ]
        queued = self.updates.of(agent_id)
        if queued:
            lines.append("Queued this step: " + "; ".join(self._describe(u) for u in queued) + ".")
        if account["goods"]:
            lines.append("You own: " + ", ".join(f"{n} {g}" for g, n in sorted(account["goods"].items())) + ".")
        lines.append("Prices: " + self._price_list() + ".")
        return "\n".join(lines)

    @tool(readonly=True)
    def list_goods(self) -> str:
        """List the goods for sale with their current prices and the units sold last step."""
        return "\n".join(f"- {g}: ${p:.2f} ({self._last['demand'].get(g, 0)} sold last step)" for g, p in sorted(self._prices.items()))

    @tool(readonly=True, kind="statistics")
    def economy_statistics(self) -> str:
        """Aggregates: spending (GDP-like), income, interest, mean/median cash, Gini of wealth, deposits, prices."""
        s = self._aggregates()
        return (
            f"Last step: spending ${s['spending']:.2f} (total ${s['spending_total']:.2f}), income ${s['income']:.2f}, "
            f"interest ${s['interest']:.2f}. {s['accounts']} accounts: mean cash ${s['mean_cash']:.2f}, "
            f"median cash ${s['median_cash']:.2f}, Gini of wealth {s['gini']:.3f}; bank deposits ${s['deposits_total']:.2f}. "
            f"Prices: {self._price_list()}."
        )

    def _describe(self, op: Update) -> str:
        if op["kind"] == "buy":
            return f"buy {op['quantity']:g} {op['good']} (${op['amount']:.2f})"
        if op["kind"] == "work":
            return f"work {op['quantity']:g}h (+${op['amount']:.2f})"
        if op["kind"] == "transfer":
            return f"pay agent {op['to_agent_id']} ${op['amount']:.2f}"
        return f"{op['kind']} ${op['amount']:.2f}"

    def _price_list(self) -> str:
        return ", ".join(f"{g} ${p:.2f}" for g, p in sorted(self._prices.items()))

    def _wealth(self) -> list[float]:
        return [a["cash"] + a["deposits"] for _, a in sorted(self._accounts.items())]

    def _aggregates(self) -> dict[str, Any]:
        ids = sorted(self._accounts)
        cash = [self._accounts[a]["cash"] for a in ids]
        return {
            **{k: self._last[k] for k in ("spending", "income", "interest")},
            "spending_total": _money(self._spending_total),
            "mean_cash": _money(statistics.fmean(cash)) if cash else 0.0,
            "median_cash": _money(statistics.median(cash)) if cash else 0.0,
            "gini": gini(self._wealth()) or 0.0,
            "deposits_total": _money(sum(self._accounts[a]["deposits"] for a in ids)),
            "accounts": len(ids),
        }

    # ---- the step ----------------------------------------------------------------------------
    def _flows(self, agent_id: int) -> dict[str, float]:
        return self._settling["flows"].setdefault(agent_id, {"spent": 0.0, "earned": 0.0})

    def apply_update(self, update: Update) -> None:
        """Settle one queued operation into the accounts and the open step's totals."""
        agent_id, amount, kind = update.agent_id, update["amount"], update["kind"]
        account = self._accounts[agent_id]
        cash_sign, deposit_sign = _EFFECTS[kind]
        account["cash"] = _money(account["cash"] + cash_sign * amount)
        account["deposits"] = _money(account["deposits"] + deposit_sign * amount)
        if kind == "work":
            self._flows(agent_id)["earned"] += amount
            self._settling["income"] += amount
        elif kind == "buy":
            good, units = update["good"], int(update["quantity"])
            account["goods"][good] = account["goods"].get(good, 0) + units
            self._settling["demand"][good] = self._settling["demand"].get(good, 0) + units
            self._flows(agent_id)["spent"] += amount
            self._settling["spending"] += amount
        elif kind == "transfer":
            payee = self._accounts[update["to_agent_id"]]
            payee["cash"] = _money(payee["cash"] + amount)
        self._settling["transactions"].append({"agent_id": agent_id, **{k: update[k] for k in ("kind", "good", "quantity", "amount", "to_agent_id")}})

    async def step(self, tick: int, t: datetime) -> None:
        for agent_id, account in sorted(self._accounts.items()):
            interest, salary = _money(account["deposits"] * self._rate), _money(self._salaries.get(agent_id, 0.0))
            account["deposits"] = _money(account["deposits"] + interest)
            account["cash"] = _money(account["cash"] + salary)
            self._flows(agent_id)["earned"] += interest + salary
            self._settling["interest"] += interest
            self._settling["income"] += salary
        self.apply_pending()
        done, self._settling = self._settling, _no_flows()
        if self._adjustment:
            for good, price in self._prices.items():
                pressure = max(-1.0, min(1.0, (done["demand"].get(good, 0) - self._target) / self._target))
                self._prices[good] = max(self._min_price, _money(price * (1 + self._adjustment * pressure)))
        flows = done["flows"]
        self._last = {
            **{k: _money(done[k]) for k in ("spending", "income", "interest")},
            "demand": done["demand"],
            "flows": {str(a): {k: _money(v) for k, v in flows[a].items()} for a in sorted(flows, key=int)},
            "transactions": done["transactions"],
        }
        self._spending_total = _money(self._spending_total + done["spending"])
        self.t = t

    # ---- replay and persistence --------------------------------------------------------------
    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [STATE, ACCOUNTS, TRANSACTIONS]

    def metric_descriptions(self) -> dict[str, str]:
        """The class's metrics and one price per good (``price_<good>``)."""
        return {**self.METRICS, **{f"price_{g}": f"price of {g} after this step's adjustment" for g in sorted(self._prices)}}

    def metrics(self) -> dict[str, float]:
        wealth, shifts = self._wealth(), [op for op in self._last["transactions"] if op["kind"] == "work"]
        workers = len({op["agent_id"] for op in shifts})
        values = {"total_money": _money(sum(wealth)), "spending": self._last["spending"], "income": self._last["income"],
                  "units_sold": float(sum(self._last["demand"].values())), "workers": float(workers),
                  "hours_worked": float(sum(op["quantity"] for op in shifts)),
                  "mean_price": statistics.fmean(self._prices.values()), **{f"price_{g}": p for g, p in self._prices.items()}}
        inequality = gini(wealth)
        if inequality is not None:  # None: no accounts, so these are undefined (not 0)
            values.update(gini_wealth=inequality, median_wealth=statistics.median(wealth),
                          mean_wealth=statistics.fmean(wealth), employment_rate=workers / len(wealth))
        return values

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        state = {"step": step, "t": t, **self._aggregates(), "prices": dict(self._prices)}
        idle = {"spent": 0.0, "earned": 0.0}
        accounts = [{"step": step, "t": t, "agent_id": a, "cash": acct["cash"], "deposits": acct["deposits"],
                     **self._last["flows"].get(str(a), idle)} for a, acct in sorted(self._accounts.items())]
        transactions = [{"step": step, "t": t, **op} for op in self._last["transactions"]]
        return {STATE.name: [state], ACCOUNTS.name: accounts, TRANSACTIONS.name: transactions}

    def dump_state(self) -> dict[str, Any]:
        settling = {**self._settling, "flows": {str(k): v for k, v in self._settling["flows"].items()}}
        return {"accounts": {str(k): v for k, v in self._accounts.items()}, "prices": self._prices, "last": self._last,
                "settling": settling, "spending_total": self._spending_total}

    def load_state(self, state: dict[str, Any]) -> None:
        self._accounts = {int(k): v for k, v in state["accounts"].items()}
        self._prices = dict(state["prices"])
        self._last, self._spending_total = dict(state["last"]), state["spending_total"]
        settling = state.get("settling") or _no_flows()
        self._settling = {**settling, "flows": {int(k): v for k, v in settling["flows"].items()}}
        self.bind_agents(self._agent_ids)  # agents bound before the restore keep an account
