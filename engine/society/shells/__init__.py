"""Shells: where a run's batch jobs and env router live (:mod:`engine.society.shells.base`)."""

from engine.society.shells.base import EnvHost, Shell
from engine.society.shells.in_process import InProcessEnvHost, InProcessShell
from engine.society.shells.on_dask import DaskEnvHost, DaskShell

__all__ = ["DaskEnvHost", "DaskShell", "EnvHost", "InProcessEnvHost", "InProcessShell", "Shell", "as_shell"]


def as_shell(where: Shell | object) -> Shell:
    """``where`` as a shell: a shell as it is, an asynchronous distributed Client in a :class:`DaskShell`."""
    from distributed import Client

    if isinstance(where, Client):
        return DaskShell(where)
    if isinstance(where, (DaskShell, InProcessShell)) or hasattr(where, "fan_out"):
        return where  # type: ignore[return-value]
    raise TypeError(f"a run needs a Shell or an asynchronous distributed Client, not {type(where).__name__}")
