"""The run cache: blobs stored by content from many threads at once."""

import threading
from concurrent.futures import ThreadPoolExecutor

from benchcurate.curation.core.cache import Cache


def test_threads_storing_the_same_blob_at_once_all_get_the_one_file(tmp_path):
    cache = Cache(tmp_path / "cache.sqlite")
    threads = 8
    for round_number in range(40):
        data = f"image payload {round_number} ".encode() * 20_000
        start = threading.Barrier(threads)

        def store(_):
            start.wait()  # all threads find the blob missing and write it together
            return cache.blob(data)

        with ThreadPoolExecutor(threads) as pool:
            paths = set(pool.map(store, range(threads)))
        assert len(paths) == 1 and paths.pop().read_bytes() == data
    assert not list((tmp_path / "blobs").rglob("*.partial"))
