"""Which span the scheduler put each task in: a scheduler plugin that reads its span records.

    await install_ledger(client)
    ... run something ...
    spans = await task_spans(client)      # {key: span name (its tags, outermost first)}, since the install

The scheduler's span records (``SpansSchedulerExtension``) keep task groups, not keys; the plugin
looks a task's span up the moment a worker takes it (and again when it finishes), so a task the
scheduler forgets later still counts, and so does a task retried after its worker died. The module is
pickled by value, so an external ``dask scheduler`` that cannot import ``tests`` runs it too.
"""

from __future__ import annotations

import sys
from typing import Any

import cloudpickle
from distributed import Client
from distributed.diagnostics.plugin import SchedulerPlugin

__all__ = ["SpanLedger", "install_ledger", "read_ledger", "task_spans"]

_NAME = "polis-test-span-ledger"

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class SpanLedger(SchedulerPlugin):
    """Records ``{key: span name}`` for every task that reaches a worker."""

    name = _NAME
    idempotent = True  # registered again (by the next test), the scheduler keeps this one and its records

    def __init__(self) -> None:
        self.spans: dict[str, tuple[str, ...]] = {}
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish not in ("processing", "memory", "erred"):
            return
        ts = self.scheduler.tasks.get(key)
        if ts is not None and ts.group.span_id is not None:
            self.spans[str(key)] = tuple(self.scheduler.extensions["spans"].spans[ts.group.span_id].name)


async def install_ledger(client: Client) -> None:
    """Register the ledger on the client's scheduler, unless it holds one (tests tell their keys apart by experiment id)."""
    await client.register_plugin(SpanLedger())


def read_ledger(dask_scheduler: Any) -> dict[str, tuple[str, ...]]:
    """The ledger's records (for ``client.run_on_scheduler``; a synchronous client gets them at once)."""
    return dict(dask_scheduler.plugins[_NAME].spans)


async def task_spans(client: Client) -> dict[str, tuple[str, ...]]:
    """What the ledger recorded so far."""
    return {key: tuple(name) for key, name in (await client.run_on_scheduler(read_ledger)).items()}
