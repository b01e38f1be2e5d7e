"""DetachedActor: calls an actor by (address, key) and always comes back, with its answer or an error.

Dask's own handle (``distributed.actor.Actor``) fails two ways that matter to a run:

- It holds a future for the actor's key; when a call cannot reach the worker, it waits for Dask to
  recompute that key, which builds a *blank* actor on another worker and sends the call there (or
  waits forever once the society has released the key).
- It runs each call in a callback that sets the call's result; when the worker answers with an
  error outside the actor's method (the worker no longer holds the actor: its key was released, or
  the worker restarted), the error escapes the callback and the call waits forever. A batch that
  makes such a call holds its worker's task slot for good: a run stopped mid-tick (shutdown,
  cancel) left its last batch running against the actor it had released, and every later run on
  that worker waited behind it.

This handle awaits the worker's ``actor_execute`` itself, on the caller's loop, so both cases raise
:class:`~engine.errors.EnvUnavailableError` at once and the society restores a new actor from the
last committed snapshot (or, for a stopped run's leftover batch, the batch ends).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from distributed import get_client, get_worker
from distributed.actor import ProxyRPC
from distributed.protocol import to_serialize

from engine.errors import EnvUnavailableError

__all__ = ["DetachedActor"]


class DetachedActor:
    """A handle on the actor ``key`` held by the worker at ``address``; ``await handle.method(*args)``.

    On a worker it calls through the worker's connection pool; elsewhere through the current
    client's (directly when the client talks to workers directly, else relayed by the scheduler,
    as Dask's own handle does).

    Raises (from every call):
        EnvUnavailableError: the worker cannot be reached, or no longer holds the actor.
        Exception: what the actor's method raised, as Dask hands it back.
    """

    def __init__(self, address: str, key: str) -> None:
        self.address = address
        self.key = key

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        if method.startswith("_"):  # pickle, copy and friends probe for dunders; they are not actor methods
            raise AttributeError(method)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._call(method, args, kwargs)

        return call

    def _rpc(self) -> Any:
        try:
            return get_worker().rpc(self.address)
        except ValueError:  # not on a worker: the driver
            client = get_client()
            return client.rpc(self.address) if client.direct_to_workers else ProxyRPC(client.scheduler, self.address)

    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            reply = await self._rpc().actor_execute(
                function=method,
                actor=self.key,
                args=[to_serialize(arg) for arg in args],
                kwargs={name: to_serialize(value) for name, value in kwargs.items()},
            )
        except OSError as error:  # CommClosedError, refused connections: the worker is gone
            raise EnvUnavailableError(f"env actor {self.key} at {self.address} unreachable: {error}") from error
        except KeyError:  # raised by the worker's lookup of the actor, before the method runs
            raise EnvUnavailableError(
                f"env actor {self.key}: the worker at {self.address} no longer holds it (released, or the worker restarted)"
            ) from None
        if reply["status"] == "OK":
            return reply["result"]
        raise reply["exception"]
