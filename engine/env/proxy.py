"""EnvRouterProxy: the serializable handle agents use to reach the env actor.

It carries the actor's (address, key) rather than the handle itself: a handle passed as a task
argument makes the scheduler pull every batch onto the actor's worker. On a worker the proxy
rebuilds the handle once per process and sends requests through a :class:`Coalescer`, which
groups the requests a batch's agents make within a few milliseconds into one ``ask_many`` call
(one actor call costs ~2 ms here, so one call per request would cap the whole simulation).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from engine.env.detached import DetachedActor
from engine.env.requests import EnvReply, EnvRequest
from engine.errors import EnvError, EnvUnavailableError, ToolCallError

if TYPE_CHECKING:
    from engine.env.handle import EnvHandle

__all__ = ["Coalescer", "EnvRequests", "EnvRouterProxy", "InProcessEnvProxy", "direct_requests", "fail_env_actor"]

_COALESCERS: dict[tuple[str, str, int], Coalescer] = {}  #: by actor key, actor method and event loop
_LOST: set[str] = set()  #: env actors the society reported lost (their requests fail at once)


class Coalescer:
    """Collects requests for ``window_s`` (or until ``max_batch``) and sends them in one call.

    Args:
        send: coroutine taking a list of requests and returning the replies in order.
        window_s: how long the first request of a group waits for company.
        max_batch: flush at once when this many are pending.
    """

    def __init__(self, send: Any, *, window_s: float = 0.002, max_batch: int = 512) -> None:
        self._send = send
        self._window_s = window_s
        self._max_batch = max_batch
        self._pending: list[tuple[EnvRequest, asyncio.Future[EnvReply]]] = []
        self._sent: set[asyncio.Future[EnvReply]] = set()  #: waiters of groups being delivered
        self._timer: asyncio.TimerHandle | None = None
        self._closed: BaseException | None = None
        self.calls = 0

    def close(self, error: BaseException) -> None:
        """Fail every waiting request with ``error`` now, and every later one (call on the loop)."""
        self._closed = error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._pending = [f for _, f in self._pending] + list(self._sent), []
        for future in waiting:
            if not future.done():
                future.set_exception(error)

    async def submit(self, request: EnvRequest) -> EnvReply:
        if self._closed is not None:
            raise self._closed
        loop = asyncio.get_running_loop()
        future: asyncio.Future[EnvReply] = loop.create_future()
        self._pending.append((request, future))
        if len(self._pending) >= self._max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._window_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        group, self._pending = self._pending, []
        if group:
            self.calls += 1
            asyncio.ensure_future(self._deliver(group))

    async def _deliver(self, group: list[tuple[EnvRequest, asyncio.Future[EnvReply]]]) -> None:
        waiters = {future for _, future in group}
        self._sent |= waiters
        try:
            replies = await self._send([request for request, _ in group])
            if len(replies) != len(group):
                # Checked here, not by zip(strict=True) below: an error there would leave every
                # waiter pending forever.
                raise ValueError(f"send returned {len(replies)} replies for {len(group)} requests")
        except BaseException as error:  # noqa: BLE001 - every waiter must learn of the failure
            for _, future in group:
                if not future.done():
                    future.set_exception(error)
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            return
        finally:
            self._sent -= waiters
        for (_, future), reply in zip(group, replies, strict=True):
            if not future.done():
                future.set_result(reply)


async def fail_env_actor(key: str, reason: str) -> int:
    """Fail at once every request this process has waiting on env actor ``key``, and any later one.

    The society runs this on every worker (``client.run``) when it sees that the actor's worker
    died: agents stop waiting for connection timeouts and their batches abort within milliseconds.
    Runs on the worker's event loop (it is ``async``), where the coalescers' futures live.
    """
    _LOST.add(key)
    error = EnvUnavailableError(f"env actor {key} was lost: {reason}")
    failed = 0
    for (coalescer_key, _, _), coalescer in list(_COALESCERS.items()):
        if coalescer_key == key:
            coalescer.close(error)
            failed += 1
    return failed


class EnvRequests:
    """The :class:`~engine.env.handle.EnvHandle` methods, over one transport: a subclass's :meth:`request`."""

    world_description: str
    env_skill_dirs: tuple[tuple[str, str], ...]

    async def request(self, request: EnvRequest) -> EnvReply:
        """Send one request to the router; its reply.

        Raises:
            EnvUnavailableError: the router cannot be reached (its actor was lost); the caller must not
                treat this as the agent's own failure.
        """
        raise NotImplementedError

    async def ask(self, request: EnvRequest) -> EnvReply:
        """Route one instruction in the router (see :meth:`RouterBase.ask`); the request crosses as it is.

        Raises:
            EnvUnavailableError: the actor's worker cannot be reached.
        """
        return await self.request(request)

    async def call_tool(self, name: str, arguments: dict[str, Any], *, readonly: bool = False) -> Any:
        """Call one tool directly, no LLM routing (rule-based agents, tool-call throughput).

        Raises:
            ToolCallError: the tool refused (unknown name, bad arguments, readonly violation).
            EnvError: the environment failed while serving the call (the actor answered ``"error"``).
        """
        agent_id = int(arguments.get("agent_id", -1))
        reply = _checked(await self.request(EnvRequest("call_tool", agent_id, name, readonly, arguments=dict(arguments))))
        if reply.status != "success":
            raise ToolCallError(reply.answer.removeprefix("error: "))
        return reply.value

    async def discard_pending(self, agent_id: int) -> int:
        """Drop what ``agent_id`` queued this tick (its agent-step is about to be re-run).

        Raises:
            EnvError: the environment failed to drop them (never read as "0 dropped").
        """
        reply = _checked(await self.request(EnvRequest("discard", agent_id)))
        return int(reply.value or 0)

    async def observe(self, agent_id: int) -> str:
        """What ``agent_id`` observes.

        Raises:
            EnvError: the environment failed to build the observation (never passed on as one).
        """
        reply = _checked(await self.request(EnvRequest("observe", agent_id, readonly=True)))
        return reply.answer

    def get_world_description(self) -> str:
        return self.world_description

    def direct(self) -> EnvRequests:
        """This handle for untraced observes and direct tool calls (see :func:`direct_requests`); here: itself."""
        return self


@dataclass(frozen=True)
class EnvRouterProxy(EnvRequests):
    """The :class:`~engine.env.handle.EnvHandle` ServiceProxy.env holds when the router lives in a Dask actor."""

    address: str
    key: str
    world_description: str = ""
    env_skill_dirs: tuple[tuple[str, str], ...] = ()  #: (module class name, skill directory)
    window_s: float = 0.002
    #: the actor method requests go to: ``ask_many``, or ``serve_direct`` (:meth:`direct`)
    method: Literal["ask_many", "serve_direct"] = "ask_many"

    def _coalescer(self) -> Coalescer:
        if self.key in _LOST:
            raise EnvUnavailableError(f"env actor {self.key} was lost")
        at = (self.key, self.method, id(asyncio.get_running_loop()))
        coalescer = _COALESCERS.get(at)
        if coalescer is None:
            coalescer = Coalescer(getattr(DetachedActor(self.address, self.key), self.method), window_s=self.window_s)
            _COALESCERS[at] = coalescer
        return coalescer

    def direct(self) -> EnvRouterProxy:
        return replace(self, method="serve_direct")

    async def request(self, request: EnvRequest) -> EnvReply:
        """Send one request (coalesced with its neighbours).

        Raises:
            EnvUnavailableError: the actor's worker cannot be reached (it died); the caller must not
                treat this as the agent's own failure.
        """
        return await self._coalescer().submit(request)


class InProcessEnvProxy(EnvRequests):
    """The env handle of a router hosted in this process (:class:`~engine.society.shells.InProcessShell`).

    Requests go through a :class:`Coalescer` to the actor object's ``ask_many``, as they reach a Dask actor, so
    both shells group and isolate requests alike. :meth:`close` fails every waiting and later request
    with :class:`~engine.errors.EnvUnavailableError`, as a lost actor does.
    """

    def __init__(self, ask_many: Any, *, serve_direct: Any = None, world_description: str = "",
                 env_skill_dirs: tuple[tuple[str, str], ...] = (), window_s: float = 0.002) -> None:
        self.world_description = world_description
        self.env_skill_dirs = env_skill_dirs
        self._coalescer = Coalescer(ask_many, window_s=window_s)
        self._direct = InProcessEnvProxy(serve_direct, world_description=world_description, env_skill_dirs=env_skill_dirs,
                                         window_s=window_s) if serve_direct is not None else None

    async def request(self, request: EnvRequest) -> EnvReply:
        return await self._coalescer.submit(request)

    def direct(self) -> EnvRequests:
        return self._direct or self

    def close(self, reason: str) -> None:
        self._coalescer.close(EnvUnavailableError(f"the in-process env was closed: {reason}"))
        if self._direct is not None:
            self._direct.close(reason)


def direct_requests(env: EnvHandle) -> EnvHandle:
    """``env`` for a caller that only observes and calls tools directly, and holds no trace (tier members).

    Over the env actor (or an in-process one) its requests are served one after another in one actor task, with no
    span each (:meth:`~engine.env.actor.EnvRouterActor.serve_direct`). Any other handle is returned as it is.
    """
    return env.direct() if isinstance(env, EnvRequests) else env


def _checked(reply: EnvReply) -> EnvReply:
    """``reply``, unless the actor answered that serving it failed (status ``"error"``, isolated per request)."""
    if reply.status == "error":
        raise EnvError(reply.answer.removeprefix("error: "))
    return reply
