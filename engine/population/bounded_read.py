"""Data files a spec names, parsed in a child process the OS bounds: a crash or a bomb costs that process only.

A population's table, a survey's file and codebook and a network layer's edge file come from whoever submits a
spec, and their parsers (pyarrow, pyreadstat, PyYAML, ``json``) are C code or recursive code that a crafted file
can crash (a flipped byte in a ``.sav`` segfaults pyreadstat), make allocate without end (a 523-byte Parquet file
whose dictionary decodes to 1.5 GB) or recurse past the stack. :func:`read_bounded` runs one parse in a fresh
interpreter (``python -I``: fork and exec, safe from a threaded service or Dask worker) that:

- may grow its address space by at most :attr:`ReadLimits.memory_mb` past its size after its imports
  (``RLIMIT_AS``), and use :attr:`ReadLimits.cpu_s` seconds of CPU (``RLIMIT_CPU``);
- is killed by the caller after :attr:`ReadLimits.wall_s` seconds, or once it answers more than
  :attr:`ReadLimits.output_bytes`;
- writes no core file and no file at all (``RLIMIT_CORE``, ``RLIMIT_FSIZE``).

At most :data:`CONCURRENT_READS` such processes run at once in one process; a caller waits for a slot.

Protocol: the caller writes one pickle to the child's stdin (the target function, its arguments, the modules to
import before the limits apply). The child calls the target, a generator in an engine module, and answers each
item it yields on its stdout as a frame (a kind byte, an 8-byte big-endian length, the body): ``J`` a JSON
value, ``q`` / ``d`` an int64 / float64 array's raw bytes. A last frame ends the answer: ``D`` done, ``E`` a
:class:`~engine.errors.DataFileError` the target raised (JSON: message, row, column), ``M`` out of memory,
``X`` any other error (JSON: its type and message). The caller trusts none of it: nothing is unpickled, and a
frame that does not decode is the child's failure. Messages never hold the file's path: the child replaces it
with the file's label (the name the spec gives) before it answers.

Whatever goes wrong (the child crashed, ran out of memory, time or output, or broke the protocol) is the
caller's ``DataFileError`` at the spec field, naming the file by its label.

:func:`read_parquet_within` is the Parquet read the targets share: the footer's row count and uncompressed
sizes are checked before any column is decoded, text columns are read as dictionaries, and their decoded size is
checked before any is expanded.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pickle
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import DataFileError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CONCURRENT_READS", "DataFile", "ReadLimits", "child_main", "decoded_bytes", "read_bounded", "read_parquet_within"]

#: How many reading processes one process runs at once (each may take :attr:`ReadLimits.memory_mb`).
CONCURRENT_READS = 2
_SLOTS = threading.BoundedSemaphore(CONCURRENT_READS)
_ROOT = str(Path(__file__).resolve().parents[2])  #: the folder holding the ``engine`` package
_BOOT = f"import sys; sys.path.append({_ROOT!r}); from engine.population.bounded_read import child_main; child_main()"
_HEADER = 9  #: a frame's kind byte and 8-byte length
_ARRAY_KINDS = {b"q"[0]: "<i8", b"d"[0]: "<f8"}
_END_KINDS = frozenset(b"DEMX")
_READ = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    """What one reading process may use."""

    memory_mb: int = 1024  #: address space the parse may add to the process's size after its imports (``RLIMIT_AS``)
    cpu_s: int = 60  #: CPU seconds, start-up included (``RLIMIT_CPU``)
    wall_s: float = 120.0  #: wall-clock seconds, start-up included, after which the process is killed
    output_bytes: int = 512 * 2**20  #: the most the process may answer


@dataclass(frozen=True)
class DataFile:
    """A data file a spec names, already located: where it is, and how errors name it."""

    path: Path  #: where it is read (never shown: a server path)
    field: str  #: the spec field naming it, e.g. ``population.0.from`` (an error's path)
    label: str  #: the file as the spec names it, for messages


# ---- the caller's side --------------------------------------------------------------------------------------

def read_bounded(target: Callable[..., Iterator[Any]], file: DataFile, *args: Any, error: type[DataFileError],
                 limits: ReadLimits = ReadLimits(), preload: Sequence[str] = ()) -> list[Any]:  # noqa: B008 - frozen
    """The items ``target(file, *args)`` yields, run in a bounded child process (see the module docstring).

    Args:
        target: a generator function defined at the top level of an engine module; it yields JSON values,
            int64 or float64 numpy arrays, and raises ``DataFileError`` for what is wrong with the file.
        file: the file it reads.
        args: its other arguments (pickled to the child).
        error: the error raised for the file (``PopulationFileError``, ``NetworkFileError``).
        limits: what the child may use.
        preload: modules the child imports before its limits apply (a parser's own start-up is not the file's).

    Raises:
        DataFileError: of type ``error``, at ``file.field``: the target's own error, or the child crashed,
            ran out of memory, CPU time, wall time or output, or answered what does not decode.
    """
    request = pickle.dumps({
        "target": f"{target.__module__}:{target.__qualname__}", "file": file, "args": args, "preload": list(preload),
        "limits": asdict(limits), "sys_path": list(sys.path),
        "hide": _hidden(file),
    })  # fmt: skip
    env = {key: os.environ[key] for key in ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ") if key in os.environ}
    # The system allocator keeps RLIMIT_AS meaning memory (arrow's own pools reserve address space up front).
    env.update(ARROW_DEFAULT_MEMORY_POOL="system", MALLOC_ARENA_MAX="2", OMP_NUM_THREADS="1")
    with _SLOTS:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and entry point
            [sys.executable, "-I", "-B", "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, close_fds=True,
        )  # fmt: skip
        try:
            answer, stopped = _exchange(proc, request, limits)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
    return _outcome(answer, stopped, proc.returncode, file, error, limits)


def _hidden(file: DataFile) -> list[tuple[str, str]]:
    """What the child replaces in its messages: the file's paths by its label, then paths in its folder by their
    names, then the folder itself."""
    paths = {str(file.path), str(file.path.absolute()), os.path.realpath(file.path)}
    folders = sorted({os.path.dirname(path) for path in paths if os.path.isabs(path)} - {os.sep}, key=len, reverse=True)
    return [*((path, file.label) for path in sorted(paths, key=len, reverse=True)),
            *((folder + os.sep, "") for folder in folders), *((folder, "the file's folder") for folder in folders)]


class _Answer:
    """The child's frames, decoded as they arrive (sans-IO)."""

    def __init__(self, cap: int) -> None:
        self.items: list[Any] = []
        self.end: tuple[str, Any] | None = None
        self.broken: str | None = None  #: why the answer does not decode
        self._cap, self._received, self._buffer = cap, 0, bytearray()

    def feed(self, chunk: bytes) -> bool:
        """Take ``chunk``; False once the answer is over its cap or broken (the child is to be killed)."""
        self._received += len(chunk)
        if self._received > self._cap:
            return False
        self._buffer += chunk
        while len(self._buffer) >= _HEADER and self.broken is None:
            kind, size = self._buffer[0], int.from_bytes(self._buffer[1:_HEADER], "big")
            if size > self._cap:
                self._received = size
                return False
            if len(self._buffer) < _HEADER + size:
                break
            body = self._buffer[_HEADER : _HEADER + size]
            del self._buffer[: _HEADER + size]
            self._take(kind, body)
        return self.broken is None

    @property
    def over(self) -> bool:
        return self._received > self._cap

    def _take(self, kind: int, body: bytearray) -> None:
        if self.end is not None:
            self.broken = "a frame after its last"
            return
        if kind in _ARRAY_KINDS:
            if len(body) % 8:
                self.broken = "an array of a partial value"
                return
            import numpy as np

            self.items.append(np.frombuffer(body, dtype=_ARRAY_KINDS[kind]))
            return
        try:
            value = json.loads(body) if body else None
        except (ValueError, RecursionError):
            self.broken = "a frame that is not JSON"
            return
        if kind == b"J"[0]:
            self.items.append(value)
        elif kind in _END_KINDS:
            self.end = (chr(kind), value)
        else:
            self.broken = f"a frame of unknown kind {kind}"


def _exchange(proc: subprocess.Popen[bytes], request: bytes, limits: ReadLimits) -> tuple[_Answer, str | None]:
    """Write ``request`` and read the answer, within the wall clock and the output cap; why it stopped, if early."""
    assert proc.stdin is not None and proc.stdout is not None
    answer = _Answer(limits.output_bytes)
    deadline = time.monotonic() + limits.wall_s
    to_child, from_child = proc.stdin.fileno(), proc.stdout.fileno()
    os.set_blocking(to_child, False)
    pending = memoryview(request)
    with selectors.DefaultSelector() as selector:
        selector.register(to_child, selectors.EVENT_WRITE)
        selector.register(from_child, selectors.EVENT_READ)
        while from_child in selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return answer, "time"
            for key, _ in selector.select(left):
                if key.fd == to_child:
                    try:
                        pending = pending[os.write(to_child, pending[:_READ]) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # it ended before reading it all: its exit status says why
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(to_child)
                        proc.stdin.close()
                    continue
                chunk = os.read(from_child, _READ)
                if not chunk:
                    selector.unregister(from_child)
                elif not answer.feed(chunk):
                    return answer, "output" if answer.over else "protocol"
    try:
        proc.wait(max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        return answer, "time"
    return answer, None


def _outcome(answer: _Answer, stopped: str | None, returncode: int | None, file: DataFile,
             error: type[DataFileError], limits: ReadLimits) -> list[Any]:
    def fail(message: str) -> DataFileError:
        return error(f"{file.label!r} {message}", file.field)

    if stopped == "time":
        raise fail(f"took more than {limits.wall_s:g} s to read; a data file is read within that")
    if stopped == "output":
        raise fail(f"reads into more than {limits.output_bytes} bytes, more than Polis takes from one data file")
    kind, body = answer.end if answer.end is not None and stopped is None else ("", None)
    if kind == "D" and returncode == 0:
        return answer.items
    if kind == "E" and isinstance(body, dict) and isinstance(message := body.get("message"), str):
        row, column = body.get("row"), body.get("column")
        raise error(message, file.field, row=row if type(row) is int else None,
                    column=column if isinstance(column, str) else None)
    if kind == "M":
        raise fail(f"needs more than {limits.memory_mb} MiB of memory to read, the most one data file may take")
    if kind == "X" and isinstance(body, dict):
        raise fail(f"cannot be read: {body.get('type')}: {body.get('message')}")
    if returncode is not None and returncode < 0:
        if -returncode == signal.SIGXCPU:
            raise fail(f"took more than {limits.cpu_s} s of CPU to read; a data file is read within that")
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else f"signal {-returncode}"
        raise fail(f"cannot be read: its parser crashed on it ({name}); the file is damaged or not what its name says")
    raise fail(f"cannot be read: its reading process ended without an answer ({answer.broken or f'exit {returncode}'})")


# ---- the child's side ---------------------------------------------------------------------------------------

class _Writer:
    """Frames to the caller, with the file's path replaced by its label in every message."""

    def __init__(self, fd: int, hide: Sequence[tuple[str, str]]) -> None:
        self._fd, self._hide = fd, hide

    def scrub(self, text: str) -> str:
        for secret, shown in self._hide:
            text = text.replace(secret, shown)
        return text

    def frame(self, kind: bytes, body: bytes) -> None:
        data = memoryview(kind + len(body).to_bytes(8, "big") + body) if len(body) < _READ else None
        if data is None:  # a large body is not copied to prepend its header
            os.write(self._fd, kind + len(body).to_bytes(8, "big"))
            data = memoryview(body)
        while data:
            data = data[os.write(self._fd, data) :]

    def item(self, value: Any) -> None:
        kind = getattr(value, "dtype", None)
        if kind is not None:
            code = {"int64": b"q", "float64": b"d"}[str(kind)]
            self.frame(code, value.astype(kind.newbyteorder("<"), copy=False).tobytes())
        else:
            self.frame(b"J", json.dumps(value, separators=(",", ":"), allow_nan=False).encode())

    def end(self, kind: bytes, value: Any = None) -> None:
        self.frame(kind, b"" if value is None else json.dumps(value).encode())


def _limit(limits: dict[str, Any]) -> None:
    """The process's limits, once its imports are done (their size is not the file's)."""
    with open("/proc/self/statm", "rb") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    for limit, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 0)):
        resource.setrlimit(limit, (value, value))
    resource.setrlimit(resource.RLIMIT_AS, (size + limits["memory_mb"] * 2**20,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 5))


def child_main() -> None:
    """The reading process: read the request from stdin, run it under its limits, answer on stdout."""
    request = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 - from the process that started this one
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # nothing a parser prints can corrupt the answer
        os.dup2(null, fd)
    os.close(null)
    file: DataFile = request["file"]
    writer = _Writer(out, request["hide"])
    sys.path.extend(entry for entry in request["sys_path"] if entry not in sys.path)
    try:
        for module in request["preload"]:
            with contextlib.suppress(ImportError):  # the target says what is missing, in its own words
                importlib.import_module(module)
        if "pyarrow" in sys.modules:  # one thread each: fewer stacks in the address space, the CPU shared fairly
            pyarrow = sys.modules["pyarrow"]
            pyarrow.set_cpu_count(1)
            pyarrow.set_io_thread_count(1)
        module_name, _, name = request["target"].partition(":")
        target = getattr(importlib.import_module(module_name), name)
        _limit(request["limits"])
        for item in target(file, *request["args"]):
            writer.item(item)
    except DataFileError as failed:
        text = str(failed)
        prefix = f"{failed.path}: " if failed.path else ""
        message = text[len(prefix) :] if prefix and text.startswith(prefix) else text
        writer.end(b"E", {"message": writer.scrub(message), "row": failed.row, "column": failed.column})
    except MemoryError:
        writer.end(b"M")
    except Exception as failed:  # noqa: BLE001 - any other failure is the file's, reported to the caller
        writer.end(b"X", {"type": type(failed).__name__, "message": writer.scrub(str(failed))[:2000]})
    else:
        writer.end(b"D")


# ---- Parquet, checked before it is decoded ------------------------------------------------------------------

_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


def _leaves(kind: pa.DataType) -> int:
    """The Parquet leaf columns an Arrow column of type ``kind`` is stored in."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind) or kind.num_fields == 0:
        return 1
    return sum(_leaves(kind.field(i).type) for i in range(kind.num_fields))


def _footer_bytes(parquet: Any, names: Sequence[str]) -> int:
    """What the footer says columns ``names`` take decoded: per column chunk, its uncompressed size or its values
    times their width, whichever is more (a run-length or dictionary page can hold many values in few bytes)."""
    schema, meta = parquet.schema_arrow, parquet.metadata
    counts = [_leaves(field.type) for field in schema]
    starts = [sum(counts[:i]) for i in range(len(counts))]
    indexes = [schema.get_field_index(name) for name in names]
    if sum(counts) == meta.num_columns and min(indexes, default=0) >= 0:
        leaves = [leaf for i in indexes for leaf in range(starts[i], starts[i] + counts[i])]
    else:  # a schema this count does not follow, or a name twice: every column counts
        leaves = list(range(meta.num_columns))
    total = 0
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for leaf in leaves:
            chunk = row_group.column(leaf)
            width = meta.schema.column(leaf).length if chunk.physical_type == "FIXED_LEN_BYTE_ARRAY" else _WIDTHS.get(
                chunk.physical_type, 8)
            total += max(chunk.total_uncompressed_size, chunk.num_values * max(width or 0, 1))
    return total


def decoded_bytes(table: pa.Table) -> int:
    """The bytes ``table`` takes with its dictionary columns decoded, counted without decoding them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    for column in table.columns:
        if not pa.types.is_dictionary(column.type):
            total += column.nbytes
            continue
        value = column.type.value_type
        for chunk in column.chunks:
            total += chunk.indices.nbytes
            if pa.types.is_binary(value) or pa.types.is_string(value) or pa.types.is_large_binary(value) \
                    or pa.types.is_large_string(value):
                lengths = pc.binary_length(chunk.dictionary)
                total += (pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0) + 4 * len(chunk)
            else:
                try:
                    total += len(chunk) * max(value.bit_width // 8, 1)
                except ValueError:  # no fixed width: as much as the dictionary for each value
                    total += len(chunk) * chunk.dictionary.nbytes
    return total


def read_parquet_within(path: Path | str, columns: Sequence[str], *, max_rows: int, max_bytes: int,
                        fail: Callable[[str], Exception]) -> pa.Table:
    """Columns ``columns`` of the Parquet file at ``path``, read only when its footer and its dictionaries show they
    fit: at most ``max_rows`` rows and ``max_bytes`` bytes decoded. Text columns come back dictionary-encoded.

    Raises:
        the exception ``fail(message)`` makes: too many rows, too many bytes by the footer, or by the dictionaries.
        pyarrow.ArrowException, OSError: the file does not parse.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    if (rows := parquet.metadata.num_rows) > max_rows:
        raise fail(f"has {rows} rows; at most {max_rows} are allowed")
    if (size := _footer_bytes(parquet, columns)) > max_bytes:
        raise fail(f"holds {size} bytes uncompressed, by its footer; at most {max_bytes} are allowed")
    types = {name: parquet.schema_arrow.field(name).type for name in columns}
    text = [name for name, kind in types.items()
            if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind)]  # fmt: skip
    table = pq.ParquetFile(path, read_dictionary=text).read(columns=list(columns))
    if (size := decoded_bytes(table)) > max_bytes:
        raise fail(f"decodes to {size} bytes; at most {max_bytes} are allowed")
    return table
