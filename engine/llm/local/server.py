"""Serve a local model with llama.cpp's OpenAI-compatible server, in a child process.

The parent (:class:`LocalModelServer`) never imports xllamacpp: it starts
``python -m engine.llm.local.server --model NAME --host H --port P``, waits for ``GET /health``,
and stops the child with SIGTERM (then SIGKILL) on ``close()``, on context-manager exit and at
interpreter exit. The child builds ``xllamacpp.Server`` (which serves in its own threads) and
blocks until SIGTERM/SIGINT or until its parent is gone.

Where it listens: :attr:`LocalServerConfig.host`, 127.0.0.1 by default. The run binds it to the
driver's address on the network the scheduler is reached by (``engine.society.run.cluster.driver_host``),
which is 127.0.0.1 for a LocalCluster and the driver's own interface address for an external
cluster, so workers on other hosts reach the one server; the preflight then connects to it from
every worker. The wildcard (0.0.0.0, ::) is refused: it would expose the model on every interface.

One server on the driver, not one per worker: measured here (2 cores, SmolLM2-135M Q4_1, 95 MB
file), one server took 1.7-2.2 s to answer ``/health`` and held 391 MiB resident once loaded
(the default 2 slots x 4,096 tokens of context). One per worker would pay that start-up and memory N times (and N model loads on
every run start) and split each worker's requests over a server of its own instead of batching all
of them in one (``n_parallel`` slots with continuous batching); the LLM calls of a run are few next
to its agent-steps, so a network hop to the driver costs less than N model loads.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from engine.llm.local.errors import LocalModelMissingError, LocalServerError
from engine.llm.local.models import gguf_path, require_server_runtime

__all__ = ["LocalModelServer", "LocalServerConfig", "local_server", "main", "serve"]

_LOOPBACK = "127.0.0.1"
_STDERR_TAIL_LINES = 20


@dataclass(frozen=True)
class LocalServerConfig:
    """How the llama.cpp server runs."""

    #: the address the server binds and its base_url names (an interface address, never the
    #: wildcard 0.0.0.0 / ::, which would expose the model on every interface)
    host: str = _LOOPBACK
    #: context tokens per parallel slot (prompt + answer); a request over it fails with 400. Agent and
    #: router prompts measured 350-1,600 tokens in two demo ticks (the longest: a second ReAct turn or a
    #: parse retry), and they grow with memory, so 2048 leaves too little room.
    n_ctx: int = 4096
    n_parallel: int = 2  #: requests decoded together (continuous batching)
    #: CPU threads for prompt processing and decoding. Half the cores: llama.cpp's threads meet at a
    #: spinning barrier per operation, so when the Dask workers or anything else want the same cores
    #: they stall. On 2 busy cores 2 threads took 15-95 s for a 30-token answer, 1 thread 0.7 s
    #: (idle, 2 threads are ~1.6x faster than 1).
    threads: int = field(default_factory=lambda: max(1, (os.cpu_count() or 2) // 2))
    #: default repetition penalty of requests that set none; 1.1 stops SmolLM2's runaway strings
    #: inside JSON (24/24 schema-valid decisions instead of 13/16 at 1.0)
    repeat_penalty: float = 1.1
    #: default output cap of requests that set no ``max_tokens`` (-1: until the slot's context is full)
    max_tokens: int = 384
    verbosity: int = 1  #: llama.cpp's log threshold; 1 keeps errors only (3 logs every request)
    startup_timeout_s: float = 60.0  #: how long the child may take to load the model and answer /health
    stop_timeout_s: float = 5.0  #: how long SIGTERM may take before SIGKILL

    def __post_init__(self) -> None:
        try:
            wildcard = ipaddress.ip_address(self.host).is_unspecified
        except ValueError:
            raise LocalServerError(f"the local model server's host must be an IP address, not {self.host!r}") from None
        if wildcard:
            raise LocalServerError(f"the local model server does not bind the wildcard address {self.host}; "
                                   "give the interface address the workers reach")


class LocalModelServer:
    """One llama.cpp server process for one local model.

    Args:
        name: the local model (``smollm2`` for ``local/smollm2``).
        config: server settings (default :class:`LocalServerConfig`).
        port: the port on ``config.host``; 0 picks a free one at :meth:`start`.

    Usage::

        with LocalModelServer("smollm2") as server:
            client = LLMClient(model="openai/smollm2", base_url=server.base_url)
    """

    def __init__(self, name: str, config: LocalServerConfig | None = None, *, port: int = 0) -> None:
        self.name = name
        self.config = config or LocalServerConfig()
        self._requested_port = port
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://HOST:PORT/v1`` (after :meth:`start`)."""
        if self.port is None:
            raise LocalServerError(f"the server for local model {self.name!r} has not been started")
        return f"http://{_url_host(self.config.host)}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> str:
        """Start the child and wait until it answers ``/health``; return :attr:`base_url`.

        Raises:
            LocalModelMissingError: the model or xllamacpp is not installed.
            LocalServerError: the child exited, or was not healthy within ``startup_timeout_s``.
        """
        if self._process is not None:
            return self.base_url
        gguf_path(self.name)  # fail here, with the install hint, rather than in the child
        require_server_runtime()
        self.port = self._requested_port or _free_port(self.config.host)
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            self._command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr, env=_child_env()
        )
        atexit.register(self.close)
        try:
            self._wait_healthy()
        except BaseException:
            self.close()
            raise
        return self.base_url

    def _command(self) -> list[str]:
        c = self.config
        return [
            sys.executable, "-m", __name__, "--model", self.name, "--host", c.host, "--port", str(self.port),
            "--n-ctx", str(c.n_ctx),
            "--n-parallel", str(c.n_parallel), "--threads", str(c.threads), "--repeat-penalty", str(c.repeat_penalty),
            "--max-tokens", str(c.max_tokens), "--verbosity", str(c.verbosity),
        ]

    def _wait_healthy(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.config.startup_timeout_s
        url = f"http://{_url_host(self.config.host)}:{self.port}/health"
        while True:
            code = self._process.poll()
            if code is not None:
                tail = self.stderr_tail()
                raise LocalServerError(
                    f"the llama.cpp server for local model {self.name!r} exited with code {code} before it was healthy;"
                    f" its stderr ends with:\n{tail or '(nothing)'}", stderr_tail=tail)
            if _answers_ok(url):
                return
            if time.monotonic() > deadline:
                tail = self.stderr_tail()
                raise LocalServerError(
                    f"the llama.cpp server for local model {self.name!r} did not answer {url} within"
                    f" {self.config.startup_timeout_s:g} s; its stderr ends with:\n{tail or '(nothing)'}", stderr_tail=tail)
            time.sleep(0.05)

    def stderr_tail(self, lines: int = _STDERR_TAIL_LINES) -> str:
        """The last ``lines`` lines the child wrote to stderr."""
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", errors="replace")
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def close(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after ``stop_timeout_s``). Idempotent."""
        process, self._process = self._process, None
        atexit.unregister(self.close)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.config.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def local_server(name: str, config: LocalServerConfig | None = None) -> Iterator[str]:
    """Serve the local model ``name`` for the duration of the block; yield its base URL.

    Args:
        name: the local model (``smollm2``).
        config: server settings.

    Raises:
        LocalModelMissingError: the model or xllamacpp is not installed.
        LocalServerError: the server did not start.
    """
    with LocalModelServer(name, config) as server:
        yield server.base_url


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        # Not listening yet (refused), or still loading (503).
        return False


def _child_env() -> dict[str, str]:
    # The child runs ``-m engine.llm.local.server``: make this checkout importable even when
    # polis is not installed into the interpreter.
    root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


# ---- the child ---------------------------------------------------------------------------------
def serve(name: str, *, port: int, config: LocalServerConfig) -> None:
    """Run llama.cpp's server for ``name`` on ``config.host``:``port``; exit the process on SIGTERM/SIGINT or when the parent is gone.

    Raises:
        LocalModelMissingError: the model is not installed.
        RuntimeError: llama.cpp could not load the model or bind the port.
    """
    import xllamacpp  # the optional extra (untyped: ignore_missing_imports covers it)

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path(name))
    params.model_alias = {name}
    params.hostnames = [config.host]
    params.port = port
    # n_ctx is per slot in our config; llama.cpp splits its n_ctx across the slots.
    params.n_ctx = config.n_ctx * config.n_parallel
    params.n_parallel = config.n_parallel
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    params.sampling.penalty_repeat = config.repeat_penalty
    params.n_predict = config.max_tokens
    params.verbosity = config.verbosity
    params.ui = False
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    parent = os.getppid()
    _server = xllamacpp.Server(params)  # serves from its own threads while it is referenced
    # If the parent dies without closing us (SIGKILL), we are re-parented: stop as well.
    while not stop.wait(0.5) and os.getppid() == parent:
        pass
    # Exit at once, without ``del _server``: a graceful shutdown waits for in-flight generations
    # (minutes on a busy CPU), and whoever asked for them is gone or done.
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """The child's command line: ``python -m engine.llm.local.server --model NAME --host H --port P``."""
    parser = argparse.ArgumentParser(prog="python -m engine.llm.local.server", description=main.__doc__)
    defaults = LocalServerConfig()
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default=defaults.host)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=defaults.n_ctx)
    parser.add_argument("--n-parallel", type=int, default=defaults.n_parallel)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--repeat-penalty", type=float, default=defaults.repeat_penalty)
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--verbosity", type=int, default=defaults.verbosity)
    args = parser.parse_args(argv)
    config = LocalServerConfig(
        host=args.host, n_ctx=args.n_ctx, n_parallel=args.n_parallel, threads=args.threads, repeat_penalty=args.repeat_penalty,
        max_tokens=args.max_tokens, verbosity=args.verbosity,
    )
    try:
        serve(args.model, port=args.port, config=config)
    except (RuntimeError, LocalModelMissingError) as error:
        # llama.cpp has already logged why (model load, bind); the parent shows this tail.
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
