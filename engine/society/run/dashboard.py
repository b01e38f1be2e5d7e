"""Each experiment on the Dask dashboard: its span, its task keys, and the dashboard page to open.

- **Span.** :func:`experiment_span` opens ``distributed.span(experiment_id)``. A span is an annotation
  held in a context variable that ``Client.submit`` reads, so every task a run submits while it is open
  joins it: the batch and questionnaire futures, the env actor and the actors that replace it after a
  worker died, from any asyncio task started inside it (a task copies the context it starts in). The
  scheduler retries a task whose worker died with its annotations, so the retry stays in the span too.
  Spans nest: a sweep's cells open theirs inside the sweep's, so a cell's span is ``(sweep id, cell id)``.
- **Task keys.** The dashboard names tasks by ``dask.utils.key_split(key)``, which keeps the first
  ``-``-separated word whole and drops each later word that holds a digit or looks hex: a service id such
  as ``3f2a9c1b7d4e`` after a ``-`` would vanish. :func:`task_key` puts the name of the span the task is
  submitted in into that first word, ``polis_<span name>_<kind>-<number>-...``, so ``key_split`` gives
  ``polis_<span name>_<kind>`` and the key never disagrees with the span. The scheduler's task group is
  the same string, so experiments of different ids never share a task group (a group stays in the span
  of its first task; two CLI runs in same-named run directories on one cluster at once would). Characters other than letters, digits and ``_`` become ``_`` (``demo-1`` is ``demo_1``).
- **Page.** :func:`experiment_page` is the page to link for an experiment (see there why that page).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dask
import distributed

__all__ = [
    "AGENTS",
    "ENV_ROUTER",
    "FINE_METRICS_PAGE",
    "NETWORK",
    "QUESTIONNAIRE",
    "cluster_dashboard",
    "experiment_page",
    "experiment_span",
    "key_kind",
    "serves_dashboard",
    "span_name",
    "task_key",
    "task_prefix",
]

#: Task kinds (the last part of a key's prefix): agent batches of a tick, questionnaire batches, the env actor, the
#: task that makes the run's network.
AGENTS, QUESTIONNAIRE, ENV_ROUTER, NETWORK = "agents", "questionnaire", "env_router", "network"
_KINDS = (AGENTS, QUESTIONNAIRE, ENV_ROUTER, NETWORK)
_KEY = re.compile(rf"polis_\w+_({'|'.join(_KINDS)})-")

#: The dashboard page that breaks a cluster's work down by span and by task prefix.
FINE_METRICS_PAGE = "individual-fine-performance-metrics"
#: The page ``distributed.dashboard.link`` names by default.
_DEFAULT_PAGE = "/status"


@contextmanager
def experiment_span(experiment_id: str) -> Iterator[str]:
    """Run the body inside ``distributed.span(experiment_id)`` (nested in the span already open, if any).

    Yields:
        The span's id (the key of its record in the scheduler's ``SpansSchedulerExtension.spans``).
    """
    with distributed.span(experiment_id) as span_id:
        yield span_id


def span_name() -> tuple[str, ...]:
    """The name of the span open in this context (its tags, outermost first); ``()`` outside any span."""
    annotation: dict[str, Any] = dask.get_annotations().get("span") or {}
    return tuple(annotation.get("name", ()))


def task_prefix(kind: str, tags: tuple[str, ...]) -> str:
    """What ``key_split`` keeps of a task key of ``kind`` submitted in the span named ``tags``."""
    return "_".join(["polis", *(re.sub(r"[^0-9A-Za-z_]", "_", tag) for tag in tags), kind])


def task_key(kind: str, run_id: str, number: int, *rest: str) -> str:
    """A task key that carries the open span's name where the dashboard keeps it.

    Args:
        kind: :data:`AGENTS`, :data:`QUESTIONNAIRE`, :data:`ENV_ROUTER` or :data:`NETWORK`.
        run_id: the run's id; it ends the key, and names it in place of a span when none is open
            (a society driven outside :func:`~engine.society.run.runner.run_experiment`).
        number: the transaction or generation; a number, so ``key_split`` stops right before it.
        rest: what else makes the key unique (attempt, batch).
    """
    return "-".join([task_prefix(kind, span_name() or (run_id,)), f"{number:06d}", *rest, run_id])


def key_kind(key: object) -> str | None:
    """The kind of a Polis task key (:func:`task_key`), or None for any other key."""
    match = _KEY.match(str(key))
    return match.group(1) if match else None


async def serves_dashboard(client: Any) -> bool:
    """Whether the client's scheduler serves the dashboard's pages.

    ``client.dashboard_link`` alone cannot tell: a ``dask scheduler --no-dashboard`` still reports its
    HTTP server (``/health``, ``/metrics``) as the "dashboard" service, and every page there answers 404.
    The Bokeh pages are there when the scheduler's HTTP application holds a Bokeh server that routes
    :data:`FINE_METRICS_PAGE`.
    """
    page = f"/{FINE_METRICS_PAGE}"

    def probe(dask_scheduler: Any) -> bool:  # nested: pickled by value, for a scheduler without Polis installed
        return any(page in getattr(app, "app_paths", ()) for app in dask_scheduler.http_application.applications)

    return bool(await client.run_on_scheduler(probe))


async def cluster_dashboard(client: Any) -> str | None:
    """The client's ``dashboard_link`` (its ``/status`` page by default); None when the scheduler serves no dashboard,
    or when there is no cluster (``client`` None: an in-process shell's)."""
    if client is None:
        return None
    try:
        link = client.dashboard_link
    except KeyError:  # a scheduler without an HTTP server reports no "dashboard" service
        return None
    if not link or not await serves_dashboard(client):  # a LocalCluster without a dashboard gives ""
        return None
    return str(link)


async def experiment_page(client: Any) -> str | None:
    """The dashboard page to link for an experiment on this client's cluster; None without a dashboard (or a cluster).

    The dashboard of distributed 2026.8 has no page per span, and none of its pages selects a span from
    its URL: the span tree appears only in ``/individual-fine-performance-metrics``, whose "Filter by
    span tag" lists every experiment id and whose "task execution by prefix" chart shows each
    experiment's ``polis_<id>_*`` prefixes. That is the most specific page an experiment has, so every
    experiment of a cluster links it. The pages that do take a task from the URL fit worse:
    ``/info/task/<key>.html`` answers 404 once the run's tasks are forgotten, and ``/profile?key=``
    profiles only tasks that run in a worker thread, while agent batches are coroutines on the
    worker's event loop.

    The base is ``client.dashboard_link``, which formats ``distributed.dashboard.link``
    (``DASK_DISTRIBUTED__DASHBOARD__LINK``) as distributed does: a link that ends in the default
    ``/status`` page has that page replaced, any other is taken as the dashboard's root.
    """
    link = await cluster_dashboard(client)
    if link is None:
        return None
    base = link.removesuffix(_DEFAULT_PAGE) if link.endswith(_DEFAULT_PAGE) else link.rstrip("/")
    return f"{base}/{FINE_METRICS_PAGE}"
