"""Shells: where a run's batch jobs and env router live (:mod:`engine.society.shells.base`)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from engine.cluster_options import IN_PROCESS
from engine.society.run.cluster import open_client
from engine.society.shells.base import EnvHost, Shell
from engine.society.shells.in_process import InProcessEnvHost, InProcessShell
from engine.society.shells.on_dask import DaskEnvHost, DaskShell

__all__ = ["DaskEnvHost", "DaskShell", "EnvHost", "InProcessEnvHost", "InProcessShell", "Shell", "as_shell", "open_shell"]


def as_shell(where: Shell | object) -> Shell:
    """``where`` as a shell: a shell as it is, an asynchronous distributed Client in a :class:`DaskShell`."""
    from distributed import Client

    if isinstance(where, Client):
        return DaskShell(where)
    if isinstance(where, (DaskShell, InProcessShell)) or hasattr(where, "fan_out"):
        return where  # type: ignore[return-value]
    raise TypeError(f"a run needs a Shell or an asynchronous distributed Client, not {type(where).__name__}")


@asynccontextmanager
async def open_shell(scheduler: str | None = None, **options: Any) -> AsyncIterator[DaskShell | InProcessShell]:
    """Yield the shell ``scheduler`` names: :data:`~engine.cluster_options.IN_PROCESS` runs in this process; anything
    else is :func:`~engine.society.run.cluster.open_client`'s (``options`` are its keyword arguments)."""
    if scheduler == IN_PROCESS:
        yield InProcessShell()
        return
    async with open_client(scheduler, **options) as client:
        yield DaskShell(client)
