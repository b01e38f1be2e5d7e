"""A network over REST: an edge file is found under POLIS_INPUT_DIRS, an id that is no agent's is a 422 naming the file,
row and id, and the file's edges are the run's network_edges; a generator expecting more edges than its owner may have
is a 422 at its field, and a run cancelled while it makes its network leaves nothing making it (issue 50)."""

from __future__ import annotations

import json
import sys
import time

import httpx

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

AGENTS = [{"id": i} for i in range(4)]


def spec(edges: str) -> dict:
    return {"name": "net", "agents": AGENTS, "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
            "network": {"layers": {"friend": {"from": edges}}}}


def test_an_edge_file_is_checked_at_submit_and_becomes_the_runs_network_edges(tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "good.csv").write_text("source,target\n0,1\n2,3\n")
    (inputs / "bad.csv").write_text("source,target\n0,1\n2,7\n")
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, input_dirs=(inputs,))
    with serve(settings) as http:
        refused = http.post("/experiments", json=spec("bad.csv"))
        assert refused.status_code == 422
        assert "'bad.csv': row 2, column 'target': 7 is no agent's id" in refused.text
        assert "network.layers.friend.from" in refused.text
        outside = http.post("/experiments", json=spec("/etc/hostname"))
        assert outside.status_code == 422 and "must be a file under" in outside.text

        posted = http.post("/experiments", json=spec("good.csv"))
        assert posted.status_code == 201, posted.text
        shown = http.get(f"/experiments/{posted.json()['id']}").text
        assert str(inputs) not in shown and str(inputs.resolve()) not in shown  # the server's path to it is not said
        assert http.get(f"/experiments/{posted.json()['id']}").json()["spec"]["network"]["layers"]["friend"]["from"] == "good.csv"
        assert wait_until_final(http, posted.json()["id"])["status"] == "completed"
        rows = http.post(f"/experiments/{posted.json()['id']}/sql",
                         json={"sql": "SELECT source, target FROM network_edges ORDER BY source"}).json()["rows"]
    assert rows == [[0, 1], [2, 3]]


def test_a_ten_million_edge_network_in_the_body_is_refused_by_the_body_limit_as_it_streams(tmp_path):
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS)
    sent = [0]

    def body():  # a follow graph of 10,000,000 edges written inline, made as it is sent: about 150 MB
        head = {"name": "net", "agents": [{"id": i} for i in range(4)], "steps": [{"type": "run", "num_steps": 1}],
                "environment": {"modules": [{"type": "SocialMediaSpace", "kwargs": {"follows": {}}}]}}
        text = json.dumps(head)
        yield text[: text.index("{}}")].encode() + b'{"0": ['
        for start in range(0, 10_000_000, 100_000):
            chunk = ",".join(map(str, range(start, start + 100_000))).encode() + b","
            sent[0] += len(chunk)
            yield chunk
        yield b'1]}}]}}'

    with serve(settings) as http:
        try:
            refused = http.post("/experiments", content=body(), headers={"Content-Type": "application/json"})
        except httpx.WriteError:  # the server answered and closed before the client finished sending
            refused = None
        if refused is not None:
            assert refused.status_code == 413 and "POLIS_MAX_BODY_BYTES" in refused.text
        assert sent[0] < 20 * settings.max_body_bytes  # it stopped reading near the limit, not at the end
        assert http.get("/experiments").json()["experiments"] == []  # nothing was made of it


def _owners(tmp_path, quotas: dict | None = None) -> tuple[dict[str, str], dict]:
    """Tokens for lab-a and lab-b, and the settings' files: lab-a's quotas from ``quotas`` (a grants file)."""
    tokens = tmp_path / "tokens.json"
    headers = {owner: {"Authorization": f"Bearer {create_token(tokens, owner)}"} for owner in ("lab-a", "lab-b")}
    files: dict = {"auth_tokens": tokens}
    if quotas is not None:
        (tmp_path / "grants.json").write_text(json.dumps({"quotas": {"lab-a": quotas}}))
        files["grants_file"] = tmp_path / "grants.json"
    return headers, files


#: Issue 50's wedge: an Erdős–Rényi layer of p = 1 over 3,000 agents (4,498,500 edges).
WEDGE = {"name": "wedge", "population": [{"count": 3000}], "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
         "llm": {"default": {"model": "sim/default"}},
         "network": {"layers": {"friend": {"generate": {"model": "erdos_renyi", "p": 1.0}}}}}


def _network_makers() -> list[str]:
    """The threads of this process (the service runs in it) now inside the code that makes a network."""
    making = []
    for thread, frame in sys._current_frames().items():
        while frame is not None:
            name = frame.f_code.co_filename.replace("\\", "/")
            if "/engine/network/" in name or name.endswith("/engine/society/run/network.py"):
                making.append(f"thread {thread}: {name}:{frame.f_lineno}")
                break
            frame = frame.f_back
    return making


def test_issue_50s_wedge_is_refused_at_submit_and_another_owners_run_starts(tmp_path):
    headers, files = _owners(tmp_path)
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, max_running=2, **files)
    with serve(settings) as http:
        for _ in range(2):  # the attack held both running slots with two of these
            refused = http.post("/experiments", json=WEDGE, headers=headers["lab-a"])
            assert refused.status_code == 422, refused.text
            [detail] = refused.json()["detail"]
            assert detail["loc"] == ["body", "network", "layers", "friend", "generate"]
            assert "expect 4,498,500 edges" in detail["msg"] and "POLIS_QUOTA_MAX_EDGES" in detail["msg"]
        assert http.get("/experiments", headers=headers["lab-a"]).json()["experiments"] == []
        other = http.post("/experiments", json={"name": "small", "agents": AGENTS[:2], "steps": [{"type": "run", "num_steps": 1}]},
                          headers=headers["lab-b"])
        assert other.status_code == 201, other.text
        with httpx.Client(base_url=http.base_url, headers=headers["lab-b"], timeout=30) as lab_b:
            assert wait_until_final(lab_b, other.json()["id"])["status"] == "completed"


def test_cancelling_a_run_while_it_makes_its_network_ends_the_work_and_the_next_run_starts(tmp_path):
    # lab-a may have the wedge's edges: it runs, and is cancelled while (or after) it makes them. Before issue 50 the
    # generator went on spinning in a thread of the service after the cancel, for good; now none is left making it.
    headers, files = _owners(tmp_path, quotas={"max_edges": 10_000_000})
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, max_running=1, **files)
    with serve(settings) as http:
        wedge = http.post("/experiments", json=WEDGE, headers=headers["lab-a"])
        assert wedge.status_code == 201, wedge.text
        queued = http.post("/experiments", json={"name": "small", "agents": AGENTS[:2], "steps": [{"type": "run", "num_steps": 1}]},
                           headers=headers["lab-b"])
        assert queued.status_code == 201, queued.text
        deadline, polls = time.monotonic() + 300, 0
        while not _network_makers():  # until the network is being made (or, on a fast machine, made already)
            polls += 1
            if polls % 50 == 0:
                record = http.get(f"/experiments/{wedge.json()['id']}", headers=headers["lab-a"]).json()
                if record["status"] != "queued" and record["progress"]["phase"] not in (None, "building network"):
                    break
            assert time.monotonic() < deadline, "the run never started making its network"
            time.sleep(0.01)
        assert http.post(f"/experiments/{wedge.json()['id']}/cancel", headers=headers["lab-a"]).status_code == 202
        with httpx.Client(base_url=http.base_url, headers=headers["lab-a"], timeout=30) as lab_a:
            assert wait_until_final(lab_a, wedge.json()["id"])["status"] == "cancelled"
        assert _network_makers() == []  # the run unwound once its network stopped: nothing works on for it
        with httpx.Client(base_url=http.base_url, headers=headers["lab-b"], timeout=30) as lab_b:
            assert wait_until_final(lab_b, queued.json()["id"])["status"] == "completed"
