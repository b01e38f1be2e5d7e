"""A real S3-protocol server (moto's) on 127.0.0.1 for the object-storage tests, and the AWS environment that points at it.

Start one server per module (or session) and point each test at it::

    @pytest.fixture(scope="module")
    def s3_endpoint():
        with moto_server() as endpoint:
            make_bucket(endpoint, "polis-test")
            yield endpoint

    def test_x(s3_endpoint, monkeypatch):
        aws_environment(monkeypatch, s3_endpoint)
        store = open_store("s3://polis-test/some/prefix")

The standard AWS variables are what a worker reads in production too: botocore (so s3fs) takes the endpoint
from ``AWS_ENDPOINT_URL``. Each server keeps its own buckets; a module's tests share its server, so give each test
its own prefix. moto accepts any credentials.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

__all__ = ["TEST_CREDENTIALS", "aws_environment", "make_bucket", "moto_server"]

#: Credentials for moto (which accepts any) that match no real account.
TEST_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Run moto's S3 server on a free port of 127.0.0.1 in a process of its own; yield its endpoint URL
    (``http://127.0.0.1:<port>``). Its own process: requests are served beside this one's work, not under its GIL."""
    for _ in range(5):  # the free port is found, then taken: another process may win it between the two
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        endpoint = f"http://127.0.0.1:{port}"
        try:
            if _wait_serving(server, endpoint):
                yield endpoint
                return
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    raise RuntimeError("moto's S3 server did not start on 127.0.0.1")


#: The server's process: moto's app under werkzeug, threaded, quiet.
_SERVE = (
    "import sys, threading\n"
    "from moto.server import ThreadedMotoServer\n"
    "ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False).start()\n"
    "threading.Event().wait()\n"
)


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the test process ends, however it ends."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_serving(server: subprocess.Popen[bytes], endpoint: str) -> bool:
    """True once the server answers; False if it ended first (its port was taken). Only a hang is bounded."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=5):
                return True
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"moto's S3 server at {endpoint} did not answer within 60 s")


def aws_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Point the standard AWS environment at ``endpoint`` with test credentials, for the rest of the test.

    The profile, session token and config files of the machine are hidden, so nothing real is used.
    """
    for name, value in {**TEST_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


def make_bucket(endpoint: str, name: str) -> None:
    """Create the bucket ``name`` on the server at ``endpoint`` (fine if it exists already)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=TEST_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    with contextlib.closing(client), contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=name)
