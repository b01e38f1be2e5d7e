"""The template cache file shared by concurrent writers, and the per-step cache ledger."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime
from pathlib import Path

from engine.env.routers.cache_ledger import CODEGEN_CACHE, CacheLedger
from engine.env.routers.template_cache import CacheStats, TemplateCache

T1 = datetime(2024, 1, 1, 9)


async def test_two_caches_on_one_file_keep_each_others_entries(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "abc.json"
    a, b = TemplateCache(path), TemplateCache(path)
    await a.store("rw", "send {x}", "A")
    await b.store("rw", "read {y}", "B")  # b merges a's entry before writing
    await a.store("ro", "look {z}", "C")

    saved = {(e["mode"], e["template"]) for e in json.loads(path.read_text())["entries"]}
    assert saved == {("rw", "send {x}"), ("rw", "read {y}"), ("ro", "look {z}")}
    assert (await a.lookup("rw", "read {y}")) is not None  # a took b's entry in when it wrote
    assert len(TemplateCache(path)) == 3
    assert sorted(p.name for p in path.parent.iterdir()) == ["abc.json"]  # no temp or lock files left


async def test_an_evicted_entry_is_not_taken_back_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    a = TemplateCache(path)
    await a.store("rw", "send {x}", "broken")
    b = TemplateCache(path)
    hit = await a.lookup("rw", "send {x}")
    assert hit is not None
    a.evict(hit)
    await b.store("rw", "read {y}", "B")  # b still holds the broken entry and writes it back
    await a.store("rw", "look {z}", "C")
    assert await a.lookup("rw", "send {x}") is None


def test_concurrent_writers_in_threads_lose_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "c.json"

    def writer(prefix: str) -> None:
        cache = TemplateCache(path)

        async def fill() -> None:
            for i in range(25):
                await cache.store("rw", f"{prefix} {i} {{x}}", f"{prefix}{i}")

        asyncio.run(fill())

    threads = [threading.Thread(target=writer, args=(p,)) for p in ("alpha", "beta", "gamma")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(json.loads(path.read_text())["entries"]) == 75


def test_ledger_rows_are_per_step_and_totals_survive_a_restore() -> None:
    live = CacheStats()
    ledger = CacheLedger(live)
    live.misses, live.generations = 3, 2
    first = ledger.row("r", 1, T1)
    live.hits_exact += 5
    second = ledger.row("r", 2, T1)
    assert (first["requests"], first["misses"], first["generations"], first["hit_rate"]) == (3, 3, 2, 0.0)
    assert (second["requests"], second["hits_exact"], second["misses"], second["hit_rate"]) == (5, 5, 0, 5 / 8)
    assert CODEGEN_CACHE.to_table([first, second]).num_rows == 2

    live.hits_exact += 1  # served after step 2 (an intervention), then the snapshot
    saved = json.loads(json.dumps(ledger.dump()))

    # The actor is rebuilt from the snapshot: a fresh router counts from zero.
    rebuilt_live = CacheStats()
    rebuilt = CacheLedger(rebuilt_live)
    rebuilt.restore(saved)
    rebuilt_live.hits_exact += 2
    third = rebuilt.row("r", 3, T1)
    assert (third["requests"], third["hits_exact"]) == (3, 3)  # the one unreported before the snapshot, plus 2
    assert rebuilt.totals() == CacheStats(hits_exact=8, misses=3, generations=2)
    assert third["hit_rate"] == 8 / 11
