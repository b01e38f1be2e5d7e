"""How Polis starts a Dask cluster: the task slots of a worker process and the options ``open_client`` takes.

Values only (no Dask at import), shared by the settings that choose them (:mod:`engine.settings`) and the code that
starts the cluster (:mod:`engine.society.run.cluster`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from distributed.security import Security

__all__ = ["IN_PROCESS", "THREADS_PER_WORKER", "ClusterOptions"]

#: The scheduler "address" that runs a run's batches and env router in the driver process, with no Dask cluster
#: (:class:`~engine.society.shells.InProcessShell`): for small runs in a notebook and for tests. No dashboard, no workers.
IN_PROCESS = "in-process"

#: Task slots per Dask worker process, in the LocalCluster and in the shipped deployments. A batch
#: task spends most of its time waiting on LLM calls; with one slot a worker runs its batches one
#: after the other and idles through each one's first and last round trip. Two slots let the next
#: batch fill those waits (llm_bound_tick, 2 workers, 200 ms LLM: warm-tick ratio 1.32 -> 1.04).
THREADS_PER_WORKER = 2


class ClusterOptions(TypedDict):
    """How ``open_client`` starts a LocalCluster (``EngineSettings.cluster_options``)."""

    n_workers: int | None
    threads_per_worker: int
    dashboard_address: str
    security: Security | None
