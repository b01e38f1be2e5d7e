"""A network's edge file over REST: found under POLIS_INPUT_DIRS; an id that is no agent's is a 422 naming the file,
row and id; and the file's edges are the run's network_edges."""

from __future__ import annotations

import json

import httpx

from engine.cluster_options import IN_PROCESS
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
