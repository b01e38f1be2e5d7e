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
from ``AWS_ENDPOINT_URL``. moto keeps its buckets in this process, shared by every server it starts here: give
each module its own bucket, or each test its own prefix. moto accepts any credentials.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import pytest

__all__ = ["TEST_CREDENTIALS", "aws_environment", "make_bucket", "moto_server"]

#: Credentials for moto (which accepts any) that match no real account.
TEST_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Run moto's S3 server on a free port of 127.0.0.1 in a thread; yield its endpoint URL (``http://127.0.0.1:<port>``)."""
    from moto.server import ThreadedMotoServer

    # werkzeug logs one line per request at INFO: keep a failing test's captured log readable.
    log = logging.getLogger("werkzeug")
    level = log.level
    log.setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        # stop() ends the serving loop but leaves the listening socket open (a ResourceWarning when collected).
        if server._server is not None:
            server._server.server_close()
        log.setLevel(level)


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
