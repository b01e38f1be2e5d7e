"""Every store keeps the one contract: local disk, memory, fsspec's memory filesystem, and S3 (a real moto server)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pickle
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from engine.errors import StorageError, StoreKeyError, StoreKeyNotFoundError, StoreUnavailableError, StoreUrlError
from engine.storage import FsspecStore, LocalStore, MemoryStore, Store, check_store, open_store
from tests.s3 import aws_environment, make_bucket, moto_server

BUCKET = "polis-store-test"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto server with the bucket ``BUCKET``; the AWS environment points at it while this module runs."""
    with moto_server() as endpoint, pytest.MonkeyPatch.context() as monkeypatch:
        aws_environment(monkeypatch, endpoint)
        make_bucket(endpoint, BUCKET)
        yield endpoint


@pytest.fixture(scope="module")
def s3_store(s3_endpoint: str) -> Store:
    """One S3 store for the module (an s3fs client takes ~0.3 s to make); each test takes a child of its own."""
    return open_store(f"s3://{BUCKET}/tests")


@contextlib.contextmanager
def fsspec_memory_store() -> Iterator[FsspecStore]:
    """A store on fsspec's (process-wide) memory filesystem, under a root of its own that is removed after."""
    root = f"/polis-test-{uuid.uuid4().hex}"
    try:
        yield FsspecStore(f"memory://{root}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            fsspec.filesystem("memory").rm(root, recursive=True)


@pytest.fixture(params=["local", "memory", "fsspec-memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "local":
        yield LocalStore(tmp_path / "store")
    elif request.param == "memory":
        yield MemoryStore()
    elif request.param == "fsspec-memory":
        with fsspec_memory_store() as store:
            yield store
    else:
        yield request.getfixturevalue("s3_store").child(uuid.uuid4().hex)


def fill(store: Store, *keys: str) -> None:
    for key in keys:
        store.set(key, key.encode())


# --- the contract, on every store ---


def test_set_then_get_returns_the_value(store: Store) -> None:
    store.set("packs/000003-0001.pack", b"\x00pack\xff")
    store.set("empty", b"")
    assert store.get("packs/000003-0001.pack") == b"\x00pack\xff"
    assert store.get("empty") == b""


def test_set_overwrites_the_old_value(store: Store) -> None:
    store.set("k", b"old value")
    store.set("k", b"new")
    assert store.get("k") == b"new"
    assert store.size("k") == 3


def test_get_of_a_missing_key_names_the_key_and_the_store(store: Store) -> None:
    with pytest.raises(StoreKeyNotFoundError) as caught:
        store.get("no/such.key")
    assert "'no/such.key'" in str(caught.value)
    assert store.url in str(caught.value)
    assert (caught.value.key, caught.value.url) == ("no/such.key", store.url)


def test_get_range_reads_a_slice_and_stops_at_the_end(store: Store) -> None:
    store.set("digits", b"0123456789")
    assert store.get_range("digits", 2, 3) == b"234"
    assert store.get_range("digits", 8, 10) == b"89"
    assert store.get_range("digits", 0, 0) == b""
    assert store.get_range("digits", 10, 5) == b""
    assert store.get_range("digits", 12, 1) == b""
    with pytest.raises(StoreKeyNotFoundError):
        store.get_range("missing", 0, 1)
    with pytest.raises(StoreKeyNotFoundError):
        store.get_range("missing", 0, 0)
    with pytest.raises(ValueError):
        store.get_range("digits", -1, 2)


def test_exists_and_size_see_keys_but_not_directories(store: Store) -> None:
    assert not store.exists("a/b")
    store.set("a/b", b"12345")
    assert store.exists("a/b")
    assert store.size("a/b") == 5
    assert not store.exists("a")
    for key in ("a", "a/c"):
        with pytest.raises(StoreKeyNotFoundError, match=key):
            store.size(key)


def test_list_prefix_is_sorted_and_recursive(store: Store) -> None:
    fill(store, "b/2", "a/sub/3", "ab", "c", "a/1")
    assert store.list_prefix("") == ["a/1", "a/sub/3", "ab", "b/2", "c"]
    assert store.list_prefix("a/") == ["a/1", "a/sub/3"]
    assert store.list_prefix("a") == ["a/1", "a/sub/3", "ab"]
    assert store.list_prefix("a/s") == ["a/sub/3"]
    assert store.list_prefix("c") == ["c"]
    assert store.list_prefix("zzz") == []
    assert store.list_prefix("zzz/") == []


def test_list_dir_names_the_immediate_children(store: Store) -> None:
    fill(store, "b/2", "a/sub/3", "ab", "c", "a/1")
    assert store.list_dir("") == (["ab", "c"], ["a", "b"])
    assert store.list_dir("a") == (["1"], ["sub"])
    assert store.list_dir("a/") == (["1"], ["sub"])
    assert store.list_dir("a/sub") == (["3"], [])
    assert store.list_dir("missing") == ([], [])


def test_delete_removes_a_key_and_a_missing_key_is_fine(store: Store) -> None:
    fill(store, "a/1", "b")
    store.delete("a/1")
    store.delete("a/1")
    store.delete("never/was")
    assert not store.exists("a/1")
    assert store.list_prefix("") == ["b"]
    assert store.list_dir("") == (["b"], [])  # the emptied directory is gone too


def test_delete_prefix_deletes_every_key_under_it_and_counts_them(store: Store) -> None:
    fill(store, "cell-1/a", "cell-1/x/y", "cell-10/a", "keep")
    assert store.delete_prefix("cell-1/") == 2
    assert store.list_prefix("") == ["cell-10/a", "keep"]
    assert store.list_dir("") == (["keep"], ["cell-10"])
    assert store.delete_prefix("cell-1/") == 0
    assert store.delete_prefix("") == 2
    assert store.list_prefix("") == []


def test_child_is_a_view_under_its_prefix(store: Store) -> None:
    cell = store.child("sweep/cell-1")
    assert type(cell) is type(store)
    assert cell.child("x").url == store.child("sweep/cell-1/x/").url
    cell.set("x/y", b"1")
    store.set("sweep/cell-1/z", b"2")
    store.set("sweep/cell-2/z", b"3")
    assert store.get("sweep/cell-1/x/y") == b"1"
    assert cell.get("z") == b"2"
    assert cell.child("x").get("y") == b"1"
    assert cell.list_prefix("") == ["x/y", "z"]
    assert cell.list_dir("") == (["z"], ["x"])
    assert cell.delete_prefix("") == 2
    assert store.list_prefix("") == ["sweep/cell-2/z"]
    with pytest.raises(StoreKeyNotFoundError, match="cell-1"):
        cell.get("z")


def test_local_root_is_only_set_on_local_disk(store: Store) -> None:
    if isinstance(store, LocalStore):
        assert store.local_root is not None and store.child("c").local_root == store.local_root / "c"
    else:
        assert store.local_root is None


@pytest.mark.parametrize("key", ["", "../x", "/abs", "a//b", "a/./b", "a\\b", "a/", "a/../b", "nul\0", "d/.k.tmp-0a1b"])
def test_bad_keys_are_refused(store: Store, key: str) -> None:
    calls = [
        lambda: store.get(key),
        lambda: store.get_range(key, 0, 1),
        lambda: store.set(key, b"x"),
        lambda: store.set_if_absent(key, b"x"),
        lambda: store.exists(key),
        lambda: store.size(key),
        lambda: store.delete(key),
    ]
    if key != "a/":  # child("a/") is child("a")
        calls.append(lambda: store.child(key))
    for call in calls:
        with pytest.raises(StoreKeyError, match="bad store key"):
            call()
    if key not in ("", "a/"):
        for listing in (store.list_prefix, store.list_dir, store.delete_prefix):
            with pytest.raises(StoreKeyError):
                listing(key if key.endswith("/") else key + "/")
    assert store.list_prefix("") == []


def test_set_if_absent_writes_only_when_the_key_is_missing(store: Store) -> None:
    assert store.set_if_absent("lease", b"first")
    assert not store.set_if_absent("lease", b"second")
    assert store.get("lease") == b"first"
    store.delete("lease")
    assert store.set_if_absent("lease", b"third")
    assert store.get("lease") == b"third"


def test_check_store_passes_and_leaves_nothing_behind(store: Store) -> None:
    check_store(store)
    assert store.list_prefix("") == []


# --- LocalStore ---


def files_under(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def test_local_set_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, durable=True)
    for value in (b"one", b"two"):
        store.set("a/b/k", value)
        store.set_if_absent("a/s", value)
    assert files_under(tmp_path) == ["a/b/k", "a/s"]
    assert (tmp_path / "a/b/k").read_bytes() == b"two"


def test_local_listings_skip_temp_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    fill(store, "a/k", "top")
    (tmp_path / ".top.tmp-0123abcd").write_bytes(b"half")
    (tmp_path / "a" / ".k.tmp-4567ef01").write_bytes(b"half")
    assert store.list_prefix("") == ["a/k", "top"]
    assert store.list_dir("") == (["top"], ["a"])
    assert store.list_dir("a") == (["k"], [])


def test_local_set_if_absent_is_exclusive_between_racing_threads(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    for i in range(100):
        barrier = threading.Barrier(2)
        won: dict[str, bool] = {}

        def claim(name: str, key: str = f"claims/{i}", barrier: threading.Barrier = barrier, won: dict[str, bool] = won) -> None:
            barrier.wait()
            won[name] = store.set_if_absent(key, name.encode())

        threads = [threading.Thread(target=claim, args=(name,)) for name in ("left", "right")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [name for name, ok in won.items() if ok]
        assert len(winners) == 1, won
        assert store.get(f"claims/{i}") == winners[0].encode()
    assert files_under(tmp_path / "claims") == sorted(str(i) for i in range(100))


def test_local_os_error_becomes_storage_error_naming_the_path(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.set("file", b"x")
    with pytest.raises(StorageError, match=str(tmp_path / "file" / "child")):
        store.set("file/child", b"y")
    assert files_under(tmp_path) == ["file"]


def test_local_deletes_remove_the_directories_they_empty_but_not_the_root(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    fill(store, "a/b/c/k", "a/b/other", "x/y/z")
    store.delete_prefix("a/b/c/")
    assert not (tmp_path / "root/a/b/c").exists() and (tmp_path / "root/a/b/other").exists()
    store.delete("x/y/z")
    store.delete_prefix("a/")
    assert list((tmp_path / "root").iterdir()) == []


# --- open_store, check_store ---


def test_open_store_takes_a_plain_path_or_a_file_url(tmp_path: Path) -> None:
    for location in (tmp_path, str(tmp_path), tmp_path.as_uri()):
        store = open_store(location)
        assert isinstance(store, LocalStore) and store.local_root == tmp_path
    with pytest.raises(StoreUrlError, match="file://elsewhere/x"):
        open_store("file://elsewhere/x")


def test_open_store_takes_a_memory_url() -> None:
    name = f"polis-test-{uuid.uuid4().hex}"
    store = open_store(f"memory://{name}")
    try:
        assert isinstance(store, FsspecStore)
        store.set("k", b"v")
        assert open_store(f"MEMORY://{name}").get("k") == b"v"  # one filesystem per process; schemes ignore case
    finally:
        store.delete_prefix("")


def test_open_store_takes_an_s3_url_and_its_endpoint_from_the_environment(s3_endpoint: str) -> None:
    assert os.environ["AWS_ENDPOINT_URL"] == s3_endpoint
    store = open_store(f"s3://{BUCKET}/runs/r1")
    assert isinstance(store, FsspecStore) and store.url == f"s3://{BUCKET}/runs/r1"
    store.set("k", b"v")
    assert open_store(f"s3://{BUCKET}/runs").get("r1/k") == b"v"
    store.delete_prefix("")


def test_s3_listings_see_the_writes_of_another_store_at_once(s3_endpoint: str) -> None:
    url = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    writer, reader = open_store(url), open_store(url)
    assert reader.list_prefix("") == [] and reader.list_dir("") == ([], [])
    writer.set("d/k", b"v")
    assert reader.list_prefix("") == ["d/k"] and reader.list_dir("") == ([], ["d"]) and reader.exists("d/k")
    writer.delete("d/k")
    assert reader.list_prefix("") == [] and reader.list_dir("") == ([], []) and not reader.exists("d/k")


def test_open_store_refuses_an_unknown_scheme_naming_it_and_the_supported_ones() -> None:
    with pytest.raises(StoreUrlError, match="ftpx://x") as caught:
        open_store("ftpx://x")
    assert "file, memory, s3" in str(caught.value)


def test_open_store_names_the_package_a_known_scheme_lacks() -> None:
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed here")
    with pytest.raises(StoreUrlError, match="pip install gcsfs"):
        open_store("gcs://bucket/run")


def test_store_url_errors_hide_credentials() -> None:
    with pytest.raises(StoreUrlError) as caught:
        open_store("ftpx://user:hunter2@host/x")
    assert "hunter2" not in str(caught.value) and "ftpx://***@host/x" in str(caught.value)


def test_check_store_names_the_url_of_a_bucket_that_does_not_exist(s3_endpoint: str) -> None:
    store = open_store("s3://polis-no-such-bucket/run")
    with pytest.raises(StoreUnavailableError, match="s3://polis-no-such-bucket/run") as caught:
        check_store(store)
    assert "bucket does not exist" in str(caught.value)


def test_check_store_on_a_directory_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StoreUnavailableError, match=str(tmp_path / "file" / "run")):
        check_store(LocalStore(tmp_path / "file" / "run"))
    assert files_under(tmp_path) == ["file"]


def test_key_not_found_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(StoreKeyNotFoundError("a/b", "s3://bucket/run")))
    assert (error.key, error.url, str(error)) == ("a/b", "s3://bucket/run", "no key 'a/b' in store s3://bucket/run")
