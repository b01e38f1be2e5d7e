"""EconomySpace's replay datasets: its aggregates, each account, and each settled operation, after every env step."""

from __future__ import annotations

from engine.storage.catalog import Column, DatasetSchema

__all__ = ["ACCOUNTS", "STATE", "TRANSACTIONS"]

STATE = DatasetSchema(
    name="economy_state",
    kind="env",
    description="EconomySpace aggregates after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="spending", type="float64", description="money spent on goods in this step (GDP-like)"),
        Column(name="income", type="float64", description="salaries and wages for work paid in this step"),
        Column(name="interest", type="float64", description="bank interest paid in this step"),
        Column(name="spending_total", type="float64", description="money spent on goods since the start"),
        Column(name="mean_cash", type="float64", description="mean cash balance over accounts"),
        Column(name="median_cash", type="float64", description="median cash balance over accounts"),
        Column(name="gini", type="float64", description="Gini coefficient of wealth (cash + deposits)"),
        Column(name="deposits_total", type="float64", description="money deposited in the bank"),
        Column(name="accounts", type="int64", description="number of accounts"),
        Column(name="prices", type="json", description="good -> price after this step's adjustment"),
    ),
)
ACCOUNTS = DatasetSchema(
    name="economy_accounts",
    kind="env",
    description="each account after each env step",
    columns=(
        Column(name="step", type="int64", description="society step that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="agent_id", type="int64", description="account holder"),
        Column(name="cash", type="float64", description="cash balance"),
        Column(name="deposits", type="float64", description="bank deposits"),
        Column(name="spent", type="float64", description="spent on goods in this step"),
        Column(name="earned", type="float64", description="salary, wages and interest received in this step"),
    ),
)
TRANSACTIONS = DatasetSchema(
    name="economy_transactions",
    kind="env",
    description="every purchase, payment, deposit, withdrawal and work shift, as settled",
    columns=(
        Column(name="step", type="int64", description="step in which it was settled"),
        Column(name="t", type="timestamp", description="simulated time of settlement"),
        Column(name="agent_id", type="int64", description="acting agent"),
        Column(name="kind", type="string", description="buy | transfer | deposit | withdraw | work"),
        Column(name="good", type="string", description="good bought (buy)"),
        Column(name="quantity", type="float64", description="units bought (buy) or hours worked (work)"),
        Column(name="amount", type="float64", description="money moved"),
        Column(name="to_agent_id", type="int64", description="payee (transfer)"),
    ),
)
