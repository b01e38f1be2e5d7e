"""The probe every worker runs: which Polis it imports, whether it reads a token file, which servers it reaches.

Standard library only: the Dask shell ships this module by value (cloudpickle), so a worker
without Polis installed still answers, with its import error.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

__all__ = ["netns_identity", "polis_identity", "probe_worker"]

#: Bytes of a token file a worker reads (the token itself is 32 hex digits).
_TOKEN_READ_LIMIT = 1024


def polis_identity() -> dict[str, Any]:
    """The Polis this process imports: ``{version, source_hash, path}``, or ``{error}`` if none.

    The hash covers every file of the ``engine`` package on disk (not ``__pycache__``), so an
    edited checkout differs from a clean one of the same version.
    """
    import hashlib
    import importlib
    import importlib.metadata

    try:
        engine = importlib.import_module("engine")
    except Exception as error:  # noqa: BLE001 - any import failure (ModuleNotFoundError, a broken install) is the answer
        return {"error": f"{type(error).__name__}: {error}"}
    file = getattr(engine, "__file__", None)
    if not file:  # a bare folder named engine somewhere on sys.path
        return {"error": f"'engine' is a namespace package ({', '.join(engine.__path__)}), not Polis"}
    root = os.path.dirname(os.path.abspath(file))
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read())
            digest.update(b"\0")
    try:
        version: str | None = importlib.metadata.version("polis")
    except importlib.metadata.PackageNotFoundError:
        version = None  # a checkout on PYTHONPATH: the hash still identifies it
    return {"version": version, "source_hash": digest.hexdigest()[:16], "path": root}


def netns_identity() -> str | None:
    """This process's network namespace (boot id + namespace inode), or None off Linux.

    Two processes share ``127.0.0.1`` exactly when these match.
    """

    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}:{os.readlink('/proc/self/ns/net')}"
    except OSError:
        return None


async def probe_worker(token_path: str, endpoints: list[list[Any]], io_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    """Run on a worker: its Polis, the token file's content, and a TCP connect to each endpoint.

    Blocking work runs in threads with a time limit, so a hung file system neither stalls the
    worker's event loop (its heartbeats) nor the probe's answer.

    Args:
        token_path: the file the driver wrote into the run directory.
        endpoints: ``[host, port]`` pairs to connect to.
        io_timeout_s: time allowed for reading the engine package and the token file.
        connect_timeout_s: time allowed for each TCP connect.

    Returns:
        A dict of plain values: ``polis``, ``token`` (``content`` or ``error``), ``endpoints``
        (``"host:port"`` -> None or the error), ``cwd``, ``hostname``, ``pid``, ``netns``.
    """
    import os

    scheme, _, rest = token_path.partition("://")
    in_store = bool(rest) and scheme.lower() != "file"

    def read_token() -> str:
        if in_store:
            # Object storage: read through this worker's own store (its credentials and endpoint). That needs Polis,
            # which a worker without it fails here too; the polis answer says why.
            from engine.storage.store import open_store

            run, _, key = token_path.rpartition("/.preflight/")
            return open_store(run).get(f".preflight/{key}")[:_TOKEN_READ_LIMIT].decode("utf-8", errors="replace")
        with open(token_path, encoding="utf-8", errors="replace") as handle:
            return handle.read(_TOKEN_READ_LIMIT)

    async def bounded(function: Any, what: str) -> tuple[Any, str | None]:
        try:
            return await asyncio.wait_for(asyncio.to_thread(function), io_timeout_s), None
        except TimeoutError:
            return None, f"{what} did not finish within {io_timeout_s:g} s"
        except Exception as error:  # noqa: BLE001 - OSError on disk; a StorageError (or an ImportError) from a store
            return None, f"{type(error).__name__}: {error}"

    async def connect(host: str, port: int) -> str | None:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout_s)
        except TimeoutError:
            return f"TCP connect timed out after {connect_timeout_s:g} s"
        except OSError as error:
            return f"{type(error).__name__}: {error}"
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass  # the connect succeeded; how the socket closes does not matter
        return None

    (polis, polis_error), (content, token_error), *reached = await asyncio.gather(
        bounded(polis_identity, "reading the engine package"),
        bounded(read_token, "reading the token file"),
        *(connect(host, port) for host, port in endpoints),
    )
    return {
        "polis": polis if polis_error is None else {"error": polis_error},
        "token": {"content": content} if token_error is None else {"error": token_error},
        "endpoints": {f"{host}:{port}": error for (host, port), error in zip(endpoints, reached, strict=True)},
        "cwd": os.getcwd(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "netns": netns_identity(),
    }
