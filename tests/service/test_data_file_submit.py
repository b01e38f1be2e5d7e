"""Data files a spec names, crafted and fuzzed, submitted to a live service: each is a 422 naming the file or an
accepted read, never a 5xx, and the service answers its health check after each. On 90329b4 a crafted ``.sav``
ended the service (SIGSEGV in pyreadstat), a 523-byte Parquet file made it allocate gigabytes, and a deep JSON
Lines row or a ``.dta`` with a label that is not UTF-8 was a 500."""

from __future__ import annotations

import json
import random
import resource
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pyreadstat
import pytest

from engine.cluster_options import IN_PROCESS
from service.settings import ServiceSettings
from tests.service.live import serve

FRAME = pd.DataFrame({"rid": [11, 12, 13, 14], "relig": [1, 3, 2, 9], "rate": [3, 1, 9, 2], "other": ["x", "y", "z", "w"]})
LABELS = {"relig": {1: "not", 2: "mildly", 3: "strongly", 9: "refused"}, "rate": {1: "poor", 2: "fair", 3: "good"}}
QUESTIONS = ["Respondent", "How religious are you?", "How do you rate your marriage?", "Other"]
CODEBOOK = {"columns": {"rid": {"role": "id"}, "relig": {"role": "persona", "missing": [9]},
                        "rate": {"role": "target", "scale": "ordinal", "missing": [9]}}}
MIB = 2**20


def spec(name: str, **population: Any) -> dict[str, Any]:
    """A spec whose one population reads ``name``; ``count: 5000`` is more rows than any file here has, so a file that
    reads is refused after it is read (at ``population.0.count``) and no run starts."""
    return {"name": "files", "population": [{"from": name, "count": 5000, **population}],
            "steps": [{"type": "run", "num_steps": 1, "tick": 600}]}


def survey_spec(name: str) -> dict[str, Any]:
    return spec(name, codebook=CODEBOOK)


def write_files(folder: Path) -> dict[str, bytes]:
    """One good file of each kind the fuzzer mutates, as bytes."""
    pyreadstat.write_sav(FRAME, str(folder / "base.sav"), column_labels=QUESTIONS, variable_value_labels=LABELS)
    pyreadstat.write_dta(FRAME, str(folder / "base.dta"), column_labels=QUESTIONS, variable_value_labels=LABELS)
    pq.write_table(pa.table({"name": ["Ann", "Bo", "Cy"], "age": [34, 50, None],
                             "city": pa.array(["Oslo", "Rome", "Oslo"]).dictionary_encode()}), folder / "base.parquet")
    (folder / "base.jsonl").write_text("".join(json.dumps(row) + "\n" for row in (
        {"name": "Ann", "age": 34, "vip": True}, {"name": "Bo", "age": None}, {"name": "Cy", "score": 1.5})))
    return {suffix: (folder / f"base{suffix}").read_bytes() for suffix in (".sav", ".dta", ".parquet", ".jsonl")}


def mutate(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one seeded change: bytes overwritten (half the time in the header, where the layout is), cut
    short, a slice repeated, or random bytes inserted."""
    out = bytearray(data)
    kind = rng.choice(("overwrite", "overwrite", "truncate", "repeat", "insert"))
    if kind == "overwrite":
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(min(len(out), 512)) if rng.random() < 0.5 else rng.randrange(len(out))
            out[at] = rng.choice((0x00, 0xFF, rng.randrange(256)))
    elif kind == "truncate":
        del out[rng.randrange(1, len(out)) :]
    elif kind == "repeat":
        start = rng.randrange(len(out))
        piece = out[start : start + rng.randint(1, 64)]
        out[start:start] = piece * rng.randint(1, 8)
    else:
        at = rng.randrange(len(out))
        out[at:at] = rng.randbytes(rng.randint(1, 32))
    return bytes(out)


def health_after(http: httpx.Client, response: httpx.Response) -> httpx.Response:
    assert response.status_code < 500, response.text
    assert http.get("/health").status_code == 200
    return response


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # this process serves (uvicorn in a thread)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "inputs"
    folder.mkdir()
    return folder


def test_crafted_files_are_422s_naming_the_file_and_the_service_lives_on(tmp_path: Path, inputs: Path):
    base = write_files(inputs)
    crashing = bytearray(base[".sav"])
    crashing[0xB4] = 0xFF  # read in the service's process, this ends it with SIGSEGV
    (inputs / "crafted.sav").write_bytes(bytes(crashing))
    (inputs / "label.dta").write_bytes(base[".dta"].replace(b"How religious are you?", b"How religious are y\xff\xfe?"))
    (inputs / "deep.jsonl").write_text('{"name": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    bomb = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1500, dtype=np.int32)), pa.array(["x" * MIB]))
    pq.write_table(pa.table({"name": bomb}), inputs / "bomb.parquet", compression="zstd")
    assert (inputs / "bomb.parquet").stat().st_size < 1000  # 1.5 GB decoded
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, input_dirs=(inputs,))
    with serve(settings) as http:
        for body, says in [
            (survey_spec("crafted.sav"), "'crafted.sav' cannot be read: its parser crashed on it (SIGSEGV)"),
            (survey_spec("label.dta"), "'label.dta' cannot be read: 'utf-8' codec can't decode byte 0xff"),
            (spec("deep.jsonl"), "'deep.jsonl' row 1 is nested too deeply to read"),
        ]:
            refused = health_after(http, http.post("/experiments", json=body))
            assert refused.status_code == 422 and says in refused.text, refused.text
            assert str(inputs) not in refused.text and "population.0.from" in refused.text
        before = peak_rss_bytes()
        refused = health_after(http, http.post("/experiments", json=spec("bomb.parquet")))
        assert refused.status_code == 422 and "'bomb.parquet' decodes to 1572876000 bytes" in refused.text, refused.text
        assert peak_rss_bytes() - before < 512 * MIB  # nothing was decoded here (on 90329b4: 6.2 GB)
        read = health_after(http, http.post("/experiments", json=survey_spec("base.sav")))
        assert read.status_code == 422 and "5000 is more than the 4 rows of the table" in read.text, read.text


def test_fuzzed_survey_parquet_and_jsonl_files_never_get_a_5xx(tmp_path: Path, inputs: Path):
    base = write_files(inputs)
    rng = random.Random(50)
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, input_dirs=(inputs,))
    outcomes: Counter[str] = Counter()
    with serve(settings) as http:
        for suffix, data in base.items():
            for n in range(8):
                name = f"fuzz{n}{suffix}"
                (inputs / name).write_bytes(mutate(data, rng))
                body = survey_spec(name) if suffix in (".sav", ".dta") else spec(name)
                response = health_after(http, http.post("/experiments", json=body))
                assert response.status_code == 422, response.text  # count: 5000 refuses even a file that reads
                detail = json.dumps(response.json())
                assert str(inputs) not in detail
                outcomes["read" if "population.0.count" in detail else "refused"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes  # the mutations both broke files and left some readable
