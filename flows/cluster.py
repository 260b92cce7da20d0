"""A Dask cluster as a run sees it (`--dask-address`): workers there before anything is sent, and a run that stops
with one line when every worker is gone, instead of waiting on its tasks forever."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from benchcurate.curation.core.errors import BackendUnavailable
from benchcurate.curation.core.extras import require

POLL_SECONDS = 2.0


def _client(address: str, seconds: float):
    require("dask", "--dask-address")
    from distributed import Client

    try:
        return Client(address, timeout=seconds, set_as_default=False)
    except (OSError, TimeoutError) as error:
        raise BackendUnavailable(
            f"no Dask scheduler answers at {address} within {seconds:g} s ({type(error).__name__}"
            f"); start it (`dask scheduler`) or fix --dask-address"
        ) from None


def wait_for_workers(address: str, seconds: float) -> int:
    """The number of workers once there is at least one, waiting up to `seconds` for the first."""
    client = _client(address, seconds)
    try:
        client.wait_for_workers(1, timeout=seconds)
        return len(client.scheduler_info()["workers"])
    except TimeoutError:
        raise BackendUnavailable(
            f"the Dask scheduler at {address} has no worker (waited {seconds:g} s); start "
            f"workers (`dask worker {address}`)"
        ) from None
    finally:
        client.close()


def watch_workers(address: str, on_gone: Callable[[str], None], grace: float) -> threading.Event:
    """Call `on_gone` with the reason (from a daemon thread) once the cluster has had no worker, or its scheduler
    has not answered, for `grace` seconds. Set the returned event to stop watching."""
    stop = threading.Event()

    def workers(client) -> int | None:
        try:
            return len(client.scheduler_info(n_workers=-1)["workers"]) if client is not None else None
        except (OSError, TimeoutError, RuntimeError):
            return None

    def loop() -> None:
        try:
            client = _client(address, grace)
        except BackendUnavailable as error:
            on_gone(str(error))
            return
        fine = time.monotonic()
        while not stop.wait(POLL_SECONDS):
            count = workers(client)
            if count:
                fine = time.monotonic()
            elif time.monotonic() - fine >= grace:
                client.close(timeout=2)
                on_gone(
                    f"the Dask cluster at {address} has had no worker for {grace:g} s"
                    if count == 0
                    else f"the Dask scheduler at {address} has not answered for {grace:g} s"
                )
                return
        client.close(timeout=2)

    threading.Thread(target=loop, name="dask-watch", daemon=True).start()
    return stop
