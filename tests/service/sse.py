"""Reading Server-Sent Events in tests: parse a stream of ``GET /experiments/{id}/events`` into events."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["SseEvent", "parse_sse", "read_events"]


@dataclass(frozen=True)
class SseEvent:
    """One event as a client sees it."""

    id: int
    name: str
    data: dict[str, Any]


def parse_sse(lines: Iterable[str]) -> Iterator[SseEvent | str]:
    """Events from the lines of a stream; a comment line (``: ...``) comes out as its text."""
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            yield line[1:].strip()
        elif line == "":
            if fields:
                yield SseEvent(int(fields["id"]), fields["event"], json.loads(fields["data"]))
            fields = {}
        else:
            key, _, value = line.partition(":")
            fields[key] = value.removeprefix(" ")


def read_events(http: httpx.Client, experiment_id: str, last_event_id: int | None = None, timeout: float = 120.0) -> list[SseEvent]:
    """Every event of one stream, read until the server ends it (comments left out)."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    with http.stream("GET", f"/experiments/{experiment_id}/events", headers=headers, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [event for event in parse_sse(response.iter_lines()) if isinstance(event, SseEvent)]
