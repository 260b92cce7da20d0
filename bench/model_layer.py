"""Model layer: client and backend throughput, failures, a SIGKILLed run resumed, and the reply cache's overhead.

Everything runs against the fake OpenAI server (tests/fakes/openai_server.py), never a paid API.

1. Throughput at 200 ms latency and concurrency 32, against the ideal concurrency / latency = 160 requests/s:
   a. client alone: `shared_client(..., concurrency=32).create` from 64 threads (more than 32, so the semaphore
      and not the caller is the limit), tiny text requests;
   b. backend path: `OpenAIBackend.complete` with the image_quality prompt and a small image (256x192 PNG,
      distinct seeds so nothing is cached) from 32 threads, with the sqlite reply cache;
   c. a real stage: image_quality over generated 256x192 images with backend.concurrency=32 (the runner runs
      2 item threads per request slot), timing only `curation.runner.run_stage` of that stage (earlier stages
      run once, untimed); c2 the same with the per-image payload cache warm, as for later model stages.
   The fake server runs in a separate process (common.FakeServerProcess) so its threads do not take the GIL
   from the client; its listen backlog is 128 (LISTEN_BACKLOG in the fake), enough for 32 at once. CPU seconds
   of both processes are reported per request, and the client's CPU per call is split (one call at a time,
   zero latency): our client (the SDK's generic post) with a tiny and with a real body, the typed create()'s
   param transform that post skips, the backend's own part (send replaced by a canned reply) and build().
2. 10% failures: 429 (Retry-After 0.1) on every 20th request and 500 on every other 10th (5% each); the whole
   multiverse recipe (`run_all`) over ~300 images at 200 ms and concurrency 32, and a fault-free run for
   reference: items lost (input items without a decision), items recorded as model errors, duplicate ids in
   kept.jsonl, requests sent vs successful calls, client-wide pauses. Then, to see where the time goes under
   faults, 1,000 tiny requests through the client alone, all submitted at once vs through the runner's
   `ordered_map` as a model stage uses it, and as it did before this benchmark (32 workers, window 64).
3. SIGKILL halfway, rerun: `curate run` (the CLI, on a Prefect server on loopback: common.prefect_api) as a
   subprocess against an in-process fake server; its process group is SIGKILLed (tests.helpers.kill_run_when)
   when half the conversation_generate requests were answered; the same command is run again (same --run-id).
   Counts requests whose canonical JSON body had already been answered 200 before the kill, and compares the
   release's sample ids with an uninterrupted run.
4. Cache overhead: 10,000 replies stored through the real backend (zero latency), then 10,000 `complete` calls
   that all hit the cache (single thread, median of 3), split into request building (prompt, image data URL,
   strict schema, key hash) and the lookup (sqlite, JSON, pydantic validation).

    cd /work/main && .venv/bin/python bench/model_layer.py [--quick]    # ~7.5 min; --quick ~35 s
    .venv/bin/python bench/model_layer.py --render                       # rewrite the .md from the saved .json
"""

from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
from PIL import Image

from tests.factories import make_image, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import kill_run_when, prepared_run, run_curate

LATENCY = 0.2
CONCURRENCY = 32
IDEAL = CONCURRENCY / LATENCY
TARGET_SHARE = 0.90
REPLY_WINDOW = 0.25  # s: a reply this close to the SIGKILL may be answered but not yet cached
IMAGE_SIZE = (256, 192)

FULL = {
    "n_client": 2000,
    "n_backend": 2000,
    "n_stage": 2000,
    "n_breakdown": 500,
    "n_faults": 300,
    "n_fault_scheduling": 1000,
    "kill_images": 200,
    "kill_latency": 0.1,
    "kill_concurrency": 8,
    "n_cache": 10_000,
    "cache_images": 200,
    "repeats": 3,
}
# A wave or two of requests per path (past 32 where the semaphore must be the limit), faults hit a few
# times, the kill lands with requests in flight.
QUICK = {
    "n_client": 64,
    "n_backend": 64,
    "n_stage": 40,
    "n_breakdown": 20,
    "n_faults": 8,
    "n_fault_scheduling": 40,
    "kill_images": 8,
    "kill_latency": 0.05,
    "kill_concurrency": 4,
    "n_cache": 100,
    "cache_images": 10,
    "repeats": 1,
}


# ================================================================================================ helpers


def make_images(folder: Path, count: int, first_seed: int = 0) -> list[Path]:
    return [
        make_image(folder / f"img-{seed:05d}.png", seed, IMAGE_SIZE) for seed in range(first_seed, first_seed + count)
    ]


def image_refs(paths: list[Path]):
    from benchcurate.curation.core.fingerprint import sha256_file
    from benchcurate.schemas import ImageRef

    refs = []
    for path in paths:
        with Image.open(path) as image:
            width, height, fmt = image.width, image.height, image.format
        refs.append(
            ImageRef(
                path=str(path),
                sha256=sha256_file(path),
                size_bytes=path.stat().st_size,
                width=width,
                height=height,
                format=fmt,
            )
        )
    return refs


def pct(value: float) -> float:
    return 100.0 * value


def backend_spec(base_url: str, **updates):
    from benchcurate.schemas import BackendSpec

    return BackendSpec(kind="openai", base_url=base_url, model="fake-vlm", **updates)


def model_requests(refs, count: int, first_seed: int):
    from benchcurate.curation.models.base import ModelRequest
    from benchcurate.curation.models.prompting import load_prompt

    prompt = load_prompt("image_quality", 1)
    return [
        ModelRequest(prompt=prompt, variables={}, images=(refs[n % len(refs)],), seed=first_seed + n)
        for n in range(count)
    ]


def tiny_body(seed: int) -> dict:
    """A short text request: the client's own cost, without building a prompt."""
    return {
        "model": "fake-vlm",
        "messages": [{"role": "user", "content": f"say something {seed}"}],
        "max_tokens": 32,
        "seed": seed,
    }


def model_store(work: Path, images: Path, base_url: str, run_id: str, backend: dict):
    """A multiverse run over `images` on the fake server's model, every image kept; configured, not yet run."""
    from benchcurate.curation.engine.store import RunStore

    overrides = {
        "image_quality": {"min_quality_score": 1},
        "category_min_size": {"min_items_per_category": 1},
        "backend": backend,
    }
    return RunStore(
        prepared_run(
            work, run_id, input_path=images, backend="openai", base_url=base_url, model="fake-vlm", overrides=overrides
        )
    )


# ================================================================================================ 1. throughput


def throughput_row(
    name: str, requests: int, seconds: list[float], client_cpu: list[float], server: dict, threads: int
) -> dict:
    wall = common.median(seconds)
    rate = requests / wall
    return {
        "path": name,
        "requests": requests,
        "threads": threads,
        "wall_seconds_all": seconds,
        "wall_seconds_median": wall,
        "requests_per_second": rate,
        "percent_of_ideal": pct(rate / IDEAL),
        "target_met": rate >= TARGET_SHARE * IDEAL,
        "client_cpu_ms_per_request": 1000 * common.median(client_cpu) / requests,
        "server_cpu_ms_per_request": 1000 * server["cpu_seconds_per_repeat"] / requests,
        "server_max_in_flight": server["max_in_flight"],
        "server_statuses": server["statuses"],
    }


def run_repeats(server: common.FakeServerProcess, repeats: int, once) -> tuple[list[float], list[float], dict]:
    """`once(repeat)` timed `repeats` times; wall seconds, client CPU seconds, server counters (all repeats)."""
    seconds, cpu = [], []
    server.reset()
    cpu_server_before = server.stats()["cpu_seconds"]
    for repeat in range(repeats):
        cpu_before = common.cpu_seconds()
        elapsed, _ = common.timed(lambda: once(repeat))
        seconds.append(elapsed)
        cpu.append(common.cpu_seconds() - cpu_before)
    stats = server.stats()
    stats["cpu_seconds_per_repeat"] = (stats["cpu_seconds"] - cpu_server_before) / repeats
    return seconds, cpu, stats


def bench_client(cfg: dict) -> dict:
    from benchcurate.curation.models.client import shared_client

    n, threads = cfg["n_client"], 2 * CONCURRENCY
    with common.FakeServerProcess(LATENCY) as server:
        client = shared_client(server.base_url, "sk-bench", concurrency=CONCURRENCY, timeout_seconds=60, max_attempts=1)
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(client.create, [tiny_body(-k - 1) for k in range(2 * CONCURRENCY)]))  # open the connections

            def once(repeat: int) -> None:
                replies = list(pool.map(client.create, [tiny_body(repeat * n + k) for k in range(n)]))
                assert len(replies) == n and all(reply.attempts == 1 for reply in replies)

            seconds, cpu, stats = run_repeats(server, cfg["repeats"], once)
    return throughput_row("a. client alone (ChatClient.create)", n, seconds, cpu, stats, threads)


def bench_backend(cfg: dict, work: Path) -> dict:
    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.models.openai_backend import OpenAIBackend

    n = cfg["n_backend"]
    refs = image_refs(make_images(work / "images", 64, first_seed=10_000))
    with common.FakeServerProcess(LATENCY) as server:
        backend = OpenAIBackend(
            backend_spec(server.base_url, concurrency=CONCURRENCY, max_retries=0),
            cache=Cache(work / "cache.sqlite"),
            api_key="sk-bench",
        )
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(backend.complete, model_requests(refs, 2 * CONCURRENCY, 10**8)))  # warm-up

            def once(repeat: int) -> None:
                results = list(pool.map(backend.complete, model_requests(refs, n, repeat * n)))
                assert len(results) == n

            seconds, cpu, stats = run_repeats(server, cfg["repeats"], once)
    assert stats["ok"] == n * cfg["repeats"], stats  # nothing came from the cache
    return throughput_row("b. backend (OpenAIBackend.complete, cache on)", n, seconds, cpu, stats, CONCURRENCY)


def bench_stage(cfg: dict, work: Path) -> dict:
    import shutil

    from benchcurate.curation.engine.runner import THREADS_PER_REQUEST_SLOT, plan_stage, run_stage
    from benchcurate.curation.models.openai_backend import REPLY_NAMESPACE

    n = cfg["n_stage"]
    images = work / "images"
    make_images(images, n)
    with common.FakeServerProcess(LATENCY) as server:
        store = model_store(work, images, server.base_url, "stage", {"concurrency": CONCURRENCY, "max_retries": 0})
        for index in range(4):  # ingest, exact dedup, phash, near dedup: untimed
            run_stage(store.root, index)
        quality = next(i for i, spec in enumerate(store.load_config().recipe.stages) if spec.stage == "image_quality")
        with sqlite3.connect(store.cache_path) as db:  # what the earlier stages cached stays
            earlier = [row[0] for row in db.execute("SELECT DISTINCT namespace FROM entries")]
        items: list[int] = []

        def once(repeat: int) -> None:  # a cold first model stage each time: its replies (and payloads) removed
            shutil.rmtree(store.stage_folder(quality, "image_quality"), ignore_errors=True)
            with sqlite3.connect(store.cache_path) as db:
                db.execute(f"DELETE FROM entries WHERE namespace NOT IN ({','.join('?' * len(earlier))})", earlier)
            stats = run_stage(store.root, quality)
            items.append(stats.items_in)

        seconds, cpu, stats = run_repeats(server, cfg["repeats"], once)
        warm_items: list[int] = []

        def once_warm(repeat: int) -> None:  # as a later model stage: only the replies removed
            shutil.rmtree(store.stage_folder(quality, "image_quality"), ignore_errors=True)
            with sqlite3.connect(store.cache_path) as db:
                db.execute("DELETE FROM entries WHERE namespace=?", (REPLY_NAMESPACE,))
            warm_items.append(run_stage(store.root, quality).items_in)

        warm_seconds, warm_cpu, warm_stats = run_repeats(server, cfg["repeats"], once_warm)
        # the same stage again with its stored work kept: only the serial decide-and-write phase runs
        shutil.rmtree(plan_stage(store, store.load_config(), quality).output_dir)
        decide_seconds, _ = common.timed(lambda: run_stage(store.root, quality))
    assert stats["ok"] == sum(items) and warm_stats["ok"] == sum(warm_items), (stats, items, warm_stats)
    threads = THREADS_PER_REQUEST_SLOT * CONCURRENCY  # the runner's item threads for a model stage
    row = throughput_row("c. stage image_quality (runner.run_stage)", items[0], seconds, cpu, stats, threads)
    warm = throughput_row(
        "c2. the same, other cache entries kept (as a later model stage)",
        warm_items[0],
        warm_seconds,
        warm_cpu,
        warm_stats,
        threads,
    )
    row["decide_and_write_seconds"] = decide_seconds
    row["note"] = (
        f"c: {n} images generated, {items[0]} reach image_quality; of its "
        f"{row['wall_seconds_median']:.2f} s, {decide_seconds:.2f} s is the serial decide-and-write phase "
        f"after the last reply (timed alone by rerunning the stage with its work kept); the model phase "
        f"alone runs at {items[0] / (row['wall_seconds_median'] - decide_seconds):.0f} req/s. c2: only "
        f"the stage's replies deleted between repeats; anything else the backend cached per image "
        f"(an encoded payload) is reused, as in the model stages after the first."
    )
    return [row, warm]


def bench_cpu_breakdown(cfg: dict, work: Path) -> dict:
    """Client-process CPU per request, one thread at a time, zero latency: where the GIL-bound time goes."""
    from openai._utils._transform import maybe_transform
    from openai.types.chat import completion_create_params

    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.models.client import ChatReply
    from benchcurate.curation.models.openai_backend import OpenAIBackend

    n = cfg["n_breakdown"]
    refs = image_refs(make_images(work / "images", 32, first_seed=50_000))

    def cpu_ms(function, items) -> float:
        before = common.cpu_seconds()
        for item in items:
            function(item)
        return 1000 * (common.cpu_seconds() - before) / len(items)

    class Canned:  # stands in for the shared client: a valid reply, no network
        slots = threading.BoundedSemaphore(1)

        def create(self, body):
            return ChatReply(
                content='{"rationale": "Sharp and well lit.", "quality_score": 4}',
                input_tokens=900,
                output_tokens=20,
                attempts=1,
            )

    with common.FakeServerProcess(0.0) as server:
        spec = backend_spec(server.base_url, concurrency=CONCURRENCY, max_retries=0)
        backend = OpenAIBackend(spec, cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        client = backend.client
        tiny = [tiny_body(k) for k in range(n)]
        bodies = [backend.build(request)[0] for request in model_requests(refs, n, 7 * 10**8)]
        client.create(tiny[0])
        rows = {
            "ChatClient.create (SDK post), tiny text body": cpu_ms(client.create, tiny),
            f"ChatClient.create (SDK post), image_quality body ({len(json.dumps(bodies[0])) // 1024} KB)": cpu_ms(
                client.create, bodies
            ),
            "  not spent: the typed create()'s param transform (maybe_transform), skipped by post": cpu_ms(
                lambda body: maybe_transform(body, completion_create_params.CompletionCreateParamsNonStreaming), bodies
            ),
            "OpenAIBackend.complete, uncached (all of it)": cpu_ms(
                backend.complete, model_requests(refs, n, 8 * 10**8)
            ),
        }
        canned = OpenAIBackend(spec, cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        canned._client = Canned()
        rows["  backend's own part (send replaced by a canned reply)"] = cpu_ms(
            canned.complete, model_requests(refs, n, 9 * 10**8)
        )
        rows["    of which build() (image data URL, strict schema, key)"] = cpu_ms(
            backend.build, model_requests(refs, n, 9 * 10**8)
        )
    return rows


# ================================================================================================ 2. failures

MODEL_STAGES = ("image_quality", "image_category", "persona_generate", "conversation_generate", "checklist_generate")


def read_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def audit_run(store) -> dict:
    """Per model stage: input items, decisions, items without a decision, model-error drops, duplicates."""
    state = store.chain()
    rows, all_dupes = {}, 0
    for index, entry in enumerate(state):
        output = Path(entry.output_dir)
        kept = read_ids(output / "kept.jsonl")
        dupes = len(kept) - len(set(kept))
        all_dupes += dupes
        if entry.stage not in MODEL_STAGES:
            continue
        source = read_ids(store.kept_path(index - 1))
        work = next(output.parent.glob("work-*/work.jsonl"))
        records = [json.loads(line) for line in work.read_text(encoding="utf-8").splitlines() if line.strip()]
        worked = Counter(record["item_id"] for record in records)
        decisions = [json.loads(line) for line in (output / "decisions.jsonl").read_text().splitlines() if line]
        rows[entry.stage] = {
            "items_in": len(source),
            "work_records": len(records),
            "decisions": len(decisions),
            "lost": sum(1 for item in source if item not in worked),
            "worked_twice": sum(1 for count in worked.values() if count > 1),
            "model_error_drops": sum(1 for record in records if "error" in record),
            "kept": len(kept),
            "duplicate_kept_ids": dupes,
        }
    final = read_ids(store.kept_path(len(state) - 1))
    return {
        "stages": rows,
        "duplicate_kept_ids_any_stage": all_dupes,
        "final_ids": final,
        "stages_done": len(state),
        "complete": len(state) == len(store.load_config().recipe.stages),
    }


class PauseMeter:
    """Counts ChatClient._pause calls and the wall time the client spent paused (wraps the method, same effect)."""

    def __init__(self):
        from benchcurate.curation.models.client import ChatClient

        self.cls, self.original = ChatClient, ChatClient._pause
        self.calls, self.intervals = 0, []

    def __enter__(self):
        meter, original = self, self.original

        def pause(client, seconds):
            meter.calls += 1
            now = time.monotonic()
            meter.intervals.append((now, now + seconds))
            return original(client, seconds)

        self.cls._pause = pause
        return self

    def __exit__(self, *exc):
        self.cls._pause = self.original

    def paused_seconds(self) -> float:
        total, end = 0.0, 0.0
        for start, stop in sorted(self.intervals):
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total


def bench_failures(cfg: dict, work: Path) -> dict:
    from benchcurate.curation.engine.runner import run_all
    from benchcurate.curation.models import client as client_module

    n = cfg["n_faults"]
    images = work / "images"
    make_images(images, n, first_seed=20_000)
    results = {}
    for mix in ("none", "ten_percent"):
        with common.FakeServerProcess(LATENCY, faults=mix, responder="scripted") as server:
            store = model_store(
                work / mix, images, server.base_url, f"faults-{mix}", {"concurrency": CONCURRENCY, "max_retries": 5}
            )
            with PauseMeter() as meter:
                elapsed, done = common.timed(lambda: run_all(store.root))
            stats = server.stats()
            clients = [c for key, c in client_module._CLIENTS.items() if key[0] == server.base_url]
            audit = audit_run(store)
            model_seconds = sum(s.seconds for s in done if s.stage in MODEL_STAGES)
        results[mix] = {
            "wall_seconds": elapsed,
            "model_stage_seconds": model_seconds,
            "server": stats,
            "client_requests_sent": sum(c.requests_sent for c in clients),
            "pauses": meter.calls,
            "paused_seconds": meter.paused_seconds(),
            "audit": audit,
        }
    base, faulty = results["none"], results["ten_percent"]
    stages = faulty["audit"]["stages"]
    summary = {
        "images": n,
        "items_through_model_stages": sum(r["items_in"] for r in stages.values()),
        "lost": sum(r["lost"] for r in stages.values()),
        "model_error_drops": sum(r["model_error_drops"] for r in stages.values()),
        "duplicate_kept_ids": faulty["audit"]["duplicate_kept_ids_any_stage"],
        "requests_sent": faulty["server"]["chat_requests"],
        "ok": faulty["server"]["ok"],
        "ok_unique_bodies": faulty["server"]["ok_unique_bodies"],
        "retries": faulty["server"]["chat_requests"] - faulty["server"]["ok"],
        "statuses": faulty["server"]["statuses"],
        "ok_without_faults": base["server"]["ok"],
        "final_ids_equal_fault_free": faulty["audit"]["final_ids"] == base["audit"]["final_ids"],
        "final_items": len(faulty["audit"]["final_ids"]),
        "model_stage_seconds": faulty["model_stage_seconds"],
        "model_stage_seconds_without_faults": base["model_stage_seconds"],
        "pauses": faulty["pauses"],
        "paused_seconds": faulty["paused_seconds"],
        "complete": faulty["audit"]["complete"],
    }
    summary["targets_met"] = summary["lost"] == 0 and summary["duplicate_kept_ids"] == 0
    for run in results.values():
        run["audit"].pop("final_ids")
    return {"summary": summary, "runs": results, "scheduling": fault_scheduling(cfg)}


def fault_scheduling(cfg: dict) -> dict:
    """Tiny requests under the same faults, client alone: all submitted at once vs the runner's ordered_map
    with the runner's settings for a model stage (THREADS_PER_REQUEST_SLOT x 32 workers, MODEL_WINDOW_ITEMS items
    submitted ahead of the oldest unfinished one), and with the settings before they were measured here (32
    workers, window 64)."""
    from benchcurate.curation.core.parallel import ordered_map
    from benchcurate.curation.models.client import shared_client

    n = cfg["n_fault_scheduling"]
    rows = {}
    with common.FakeServerProcess(LATENCY, faults="ten_percent") as server:
        client = shared_client(server.base_url, "sk-bench", concurrency=CONCURRENCY, timeout_seconds=60, max_attempts=6)

        def bodies(first: int) -> list[dict]:
            return [tiny_body(k) for k in range(first, first + n)]

        with concurrent.futures.ThreadPoolExecutor(2 * CONCURRENCY) as pool:
            list(pool.map(client.create, bodies(-2 * CONCURRENCY)[: 2 * CONCURRENCY]))  # open the connections
            with PauseMeter() as meter:
                seconds, _ = common.timed(lambda: list(pool.map(client.create, bodies(0))))
            rows["all submitted at once (64 threads)"] = {
                "requests_per_second": n / seconds,
                "pauses": meter.calls,
                "paused_seconds": meter.paused_seconds(),
            }
        from benchcurate.curation.engine.runner import MODEL_WINDOW_ITEMS, THREADS_PER_REQUEST_SLOT

        workers = THREADS_PER_REQUEST_SLOT * CONCURRENCY
        settings = [
            (f"runner's ordered_map ({workers} workers, window {MODEL_WINDOW_ITEMS})", workers, MODEL_WINDOW_ITEMS),
            (f"before: ordered_map ({CONCURRENCY} workers, window {2 * CONCURRENCY})", CONCURRENCY, None),
        ]
        for first, (name, threads, window) in enumerate(settings, 1):
            with PauseMeter() as meter:
                seconds, _ = common.timed(
                    lambda: list(ordered_map(client.create, bodies(first * n), "threads", threads, window))
                )
            rows[name] = {
                "requests_per_second": n / seconds,
                "pauses": meter.calls,
                "paused_seconds": meter.paused_seconds(),
            }
    return {"requests": n, "rows": rows}


# ================================================================================================ 3. SIGKILL


def release_ids(out: Path) -> list[str]:
    import pyarrow.parquet as pq

    files = sorted(out.rglob("releases/*/*/data/*.parquet"))
    if not files:
        return []
    return sorted(pq.read_table(files[-1], columns=["index"]).column("index").to_pylist())


def bench_sigkill(cfg: dict, work: Path) -> dict:
    """Scenario 3 with a Prefect server for its runs: the product's local server of `work` as an output folder, or
    the one $BENCH_PREFECT_API_URL names."""
    with common.prefect_api(work) as api_url:
        return sigkill_and_rerun(cfg, work, common.curate_env(api_url))


def sigkill_and_rerun(cfg: dict, work: Path, env: dict[str, str]) -> dict:
    images = make_images(work / "images", cfg["kill_images"], first_seed=30_000)[0].parent
    stage, schema = "conversation_generate", "ConversationReply"

    def args(server: FakeOpenAIServer, out: str) -> list[str]:
        return [
            "run",
            "multiverse",
            "--input",
            str(images),
            "--backend",
            "openai",
            "--base-url",
            server.base_url,
            "--model",
            "fake-vlm",
            "--run-id",
            "killme",
            "--out",
            str(work / out),
            "--progress",
            "none",
            "--concurrency",
            str(cfg["kill_concurrency"]),
            "--set",
            "image_quality.min_quality_score=1",
            "--set",
            "category_min_size.min_items_per_category=1",
        ]

    def run(server: FakeOpenAIServer, out: str) -> float:
        seconds, result = common.timed(lambda: run_curate(args(server, out), work, env, timeout=600))
        if result.returncode != 0:
            raise RuntimeError(f"curate run ({out}) exited {result.returncode}:\n{result.stderr[-3000:]}")
        return seconds

    def answered(server: FakeOpenAIServer) -> int:
        return sum(1 for entry in server.reply_log if entry.status == 200 and entry.schema_name == schema)

    # an uninterrupted run for reference
    with FakeOpenAIServer(latency_seconds=cfg["kill_latency"], responder=scripted_reply, record_bodies=False) as server:
        reference_seconds = run(server, "reference")
        reference = server.stats()
    reference_ids = release_ids(work / "reference")
    expected = reference["ok_by_schema"].get(schema, 0)

    with FakeOpenAIServer(latency_seconds=cfg["kill_latency"], responder=scripted_reply, record_bodies=False) as server:
        started = time.monotonic()
        # settle: the dead client's requests in flight also get their (unread) replies before the rerun starts
        kill_time = kill_run_when(
            args(server, "killed"),
            work,
            env,
            lambda: answered(server) >= expected / 2,
            timeout=600,
            log=work / "killed.log",
            settle=max(1.0, 3 * cfg["kill_latency"]),
        )
        if kill_time is None:
            raise RuntimeError(f"the run ended before the kill point:\n{(work / 'killed.log').read_text()[-3000:]}")
        seconds_to_kill = kill_time - started
        rerun_start = time.monotonic()
        rerun_seconds = run(server, "killed")
        log = server.reply_log
    before = [entry for entry in log if entry[2] <= kill_time]
    to_dead_client = [entry for entry in log if kill_time < entry[2] <= rerun_start]
    after = [entry for entry in log if entry[2] > rerun_start]
    answered_before = {digest: at for digest, status, at, _ in before if status == 200}
    repeated = [(digest, answered_before[digest]) for digest, _, _, _ in after if digest in answered_before]
    ages_ms = sorted(1000 * (kill_time - at) for _, at in repeated)
    killed_ids = release_ids(work / "killed")
    by_schema_before = Counter(name for _, status, _, name in before if status == 200)
    return {
        "driver": "curate run (CLI, a Prefect server on loopback)",
        "images": cfg["kill_images"],
        "latency_seconds": cfg["kill_latency"],
        "concurrency": cfg["kill_concurrency"],
        "kill_stage": stage,
        "kill_stage_requests_expected": expected,
        "kill_stage_answered_before_kill": by_schema_before.get(schema, 0),
        "answered_before_kill_by_schema": dict(by_schema_before),
        "seconds_to_kill": seconds_to_kill,
        "reference_seconds": reference_seconds,
        "rerun_seconds": rerun_seconds,
        "reference_requests": reference["chat_requests"],
        "requests_before_kill": len(before),
        "answered_after_kill_to_the_dead_client": len(to_dead_client),
        "requests_rerun": len(after),
        "requests_total": len(log),
        "repeated_answered_before_kill": len(repeated),
        "repeated_answered_over_half_a_second_before_kill": sum(1 for age in ages_ms if age > 500),
        "repeated_age_at_kill_ms": ages_ms,
        "extra_requests_vs_reference": len(log) - reference["chat_requests"],
        "release_items": len(killed_ids),
        "reference_release_items": len(reference_ids),
        "release_matches_reference": bool(killed_ids) and killed_ids == reference_ids,
        "strict_zero_repeats": not repeated,
        # a reply answered in the last moments before the kill may not have reached the client's cache yet
        "target_met": all(age <= 1000 * REPLY_WINDOW for age in ages_ms)
        and bool(killed_ids)
        and killed_ids == reference_ids,
    }


# ================================================================================================ 4. cache overhead


def bench_cache(cfg: dict, work: Path) -> dict:
    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.core.decode import decode_image
    from benchcurate.curation.core.fingerprint import sha256_json
    from benchcurate.curation.models.openai_backend import REPLY_NAMESPACE, OpenAIBackend, strict_schema
    from benchcurate.curation.models.pricing import estimate_input_tokens
    from benchcurate.curation.models.usage import collecting

    n, repeats = cfg["n_cache"], cfg["repeats"]
    refs = image_refs(make_images(work / "images", cfg["cache_images"], first_seed=40_000))
    requests = model_requests(refs, n, 0)
    with common.FakeServerProcess(0.0) as server:
        spec = backend_spec(server.base_url, concurrency=CONCURRENCY, max_retries=0)
        filler = OpenAIBackend(spec, cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
            fill_seconds, _ = common.timed(lambda: list(pool.map(filler.complete, requests)))
        filled = server.stats()["ok"]
        # a fresh backend and cache object, as a rerun in a new process would have
        backend = OpenAIBackend(spec, cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        with collecting() as usage:
            total_us, total_all = common.per_call_us(backend.complete, requests, repeats)
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
            threaded_seconds, _ = common.timed(lambda: list(pool.map(backend.complete, requests)))
        sent_during_hits = server.stats()["ok"] - filled
    cached_calls = sum(u.cached_calls for u in usage.values())

    # the parts, each over the same requests
    built = [backend.build(request) for request in requests]
    keys = [key for _, key, _ in built]
    prompt = requests[0].prompt
    side = spec.image_max_side_px
    parts: dict[str, float] = {}
    parts["build (all of it)"], _ = common.per_call_us(backend.build, requests, repeats)
    parts["  prompt render"], _ = common.per_call_us(lambda r: r.prompt.render(r.variables), requests, repeats)

    def encode(request):  # what build() did for every call before the payload cache (14:38 UTC change)
        picture = decode_image(Path(request.images[0].path)).image
        picture.thumbnail((side, side))
        buffer = io.BytesIO()
        picture.save(buffer, format="JPEG", quality=90)
        return base64.b64encode(buffer.getvalue()).decode()

    parts[IMAGE_PART], _ = common.per_call_us(lambda r: backend._image_part(r.images[0]), requests, repeats)
    parts["  reference: encoding from the file (decode + thumbnail + JPEG + base64)"], _ = common.per_call_us(
        encode, requests, repeats
    )
    parts["    of which decode_image (file read + PNG decode)"], _ = common.per_call_us(
        lambda r: decode_image(Path(r.images[0].path)).image, requests, repeats
    )
    with JpegSaves() as saves:
        for request in requests:
            backend.build(request)
    parts["  strict_schema (as build() calls it)"], _ = common.per_call_us(
        lambda r: strict_schema(r.prompt.output_schema), requests, repeats
    )
    key_inputs = []
    for request, (body, _, _) in zip(requests, built):
        rendered = request.prompt.render(request.variables)
        size = (request.images[0].width, request.images[0].height)
        key_inputs.append(
            {
                "base_url": backend.base_url,
                "prompt_sha256": prompt.sha256,
                "body": {**body, "messages": [rendered.system, rendered.user]},
                "images": [[request.images[0].sha256, list(size)]],
                "image_transport": "data_url",
            }
        )
    parts["  cache key (canonical JSON + sha256)"], _ = common.per_call_us(sha256_json, key_inputs, repeats)
    parts["  token estimate"], _ = common.per_call_us(
        lambda r: estimate_input_tokens([prompt.system, prompt.user], [(r.images[0].width, r.images[0].height)]),
        requests,
        repeats,
    )
    cache = backend.cache
    parts["lookup: cache.get (sqlite SELECT + json.loads)"], _ = common.per_call_us(
        lambda key: cache.get(REPLY_NAMESPACE, key), keys, repeats
    )
    db = cache._connection()
    parts["  of which sqlite SELECT alone"], _ = common.per_call_us(
        lambda key: db.execute(
            "SELECT value FROM entries WHERE namespace=? AND key=?", (REPLY_NAMESPACE, key)
        ).fetchone(),
        keys,
        repeats,
    )
    stored = [cache.get(REPLY_NAMESPACE, key) for key in keys]
    parts["validate reply (pydantic model_validate_json)"], _ = common.per_call_us(
        lambda value: prompt.output_schema.model_validate_json(value["content"]), stored, repeats
    )
    with collecting():
        parts["_cached (lookup + validate + usage record)"], _ = common.per_call_us(
            lambda pair: backend._cached(pair[1], pair[0], "fake-vlm"), list(zip(requests, keys)), repeats
        )
    image_us = parts[IMAGE_PART]
    return {
        "calls": n,
        "distinct_images": len(refs),
        "image_px": list(IMAGE_SIZE),
        "fill_seconds": fill_seconds,
        "fill_calls_per_second_32_threads": n / fill_seconds,
        "replies_stored": filled,
        "requests_sent_during_cached_rerun": sent_during_hits,
        "cached_calls_recorded": cached_calls,
        "complete_us_per_call_median": total_us,
        "complete_seconds_all": total_all,
        "cached_calls_per_second_32_threads": n / threaded_seconds,
        "parts_us_per_call": parts,
        "image_part_share_of_hit": image_us / total_us,
        "jpeg_encodes_per_cached_build": saves.count / n,
        "image_encoded_on_every_hit": saves.count >= n,
    }


IMAGE_PART = "  image part as build() makes it (backend._image_part)"


class JpegSaves:
    """Counts JPEG encodes (PIL Image.save with format JPEG) inside the block, whatever code makes them."""

    def __enter__(self):
        self.count, self.original = 0, Image.Image.save
        meter = self

        def save(image, fp, format=None, **params):  # PIL's own parameter name
            if (format or "").upper() in ("JPEG", "JPG"):
                meter.count += 1
            return meter.original(image, fp, format, **params)

        Image.Image.save = save
        return self

    def __exit__(self, *exc):
        Image.Image.save = self.original


# ================================================================================================ report


def report(data: dict, quick: bool) -> str:
    """The result file's markdown (printed too), one section per scenario after a summary of all four."""
    lines = header(data, quick) + summary(data)
    lines += throughput_section(data) + failures_section(data) + sigkill_section(data["sigkill"])
    lines += cache_section(data["cache"], data["repeats"])
    return "\n\n".join(lines)


def header(data: dict, quick: bool) -> list[str]:
    m = data["machine"]
    lines = [
        f"# Model layer{' (quick)' if quick else ''}",
        f"Machine: {common.machine_line(m)}; openai {m['openai']}, httpx {m['httpx']}, pydantic "
        f"{m['pydantic']}. Only 2 cores: client, fake server (separate process) and sqlite share them.",
        f"Fake server: tests/fakes/openai_server.py, in its own process for 1, 2 and 4. Timings are the "
        f"median of {data['repeats']} run(s) where repeated.",
    ]
    if "code_at_start" in data:
        code = data["code_at_start"]
        lines.append(
            f"Run started {data['started_utc']} UTC on code fingerprint {code['sha256']} ({code['files']} "
            f"files under curation/, schemas/, flows/, prompts/ and the fake server; newest change "
            f"{code['newest_mtime_utc']} UTC)"
            + (
                "; **the code changed during the run**."
                if data["code_changed_during_run"]
                else "; unchanged during the run."
            )
        )
    if quick:
        lines.append(
            "Quick mode: a smoke test. The sizes are too small for the rates to mean much (a wave or two "
            "of 200 ms, ramp-up included)."
        )
    return lines


def summary(data: dict) -> list[str]:
    t, f, k, c = data["throughput"], data["failures"]["summary"], data["sigkill"], data["cache"]
    rows = [
        [
            "1" + r["path"],
            f">= {TARGET_SHARE * 100:.0f}% of {IDEAL:.0f} req/s",
            f"{r['requests_per_second']:.0f} req/s = {r['percent_of_ideal']:.1f}%",
            "met" if r["target_met"] else "NOT met",
        ]
        for r in t
    ]
    rows += [
        [
            "2. 10% failures: items lost / duplicates",
            "0 / 0",
            f"{f['lost']} / {f['duplicate_kept_ids']}",
            "met" if f["targets_met"] else "NOT met",
        ],
        [
            "3. SIGKILL + rerun: bodies answered before the kill sent again",
            "0",
            f"{k['repeated_answered_before_kill']} (older than {REPLY_WINDOW * 1000:.0f} ms: "
            f"{sum(1 for a in k['repeated_age_at_kill_ms'] if a > REPLY_WINDOW * 1000)}); release ids "
            f"{'identical' if k['release_matches_reference'] else 'DIFFER'}",
            "met" if k["target_met"] else "NOT met",
        ],
        [
            "4. fully cached call",
            "(report)",
            f"{c['complete_us_per_call_median']:.0f} us, of which build "
            f"{c['parts_us_per_call']['build (all of it)']:.0f} us, lookup "
            f"{c['parts_us_per_call']['_cached (lookup + validate + usage record)']:.0f} us",
            "",
        ],
    ]
    return ["## Summary", common.table(["measure", "target", "result", ""], rows)[1]]


def throughput_section(data: dict) -> list[str]:
    t = data["throughput"]
    head = [
        "path",
        "requests",
        "threads",
        "wall s",
        "req/s",
        "% of ideal",
        ">= 90%",
        "client CPU ms/req",
        "server CPU ms/req",
        "server max in flight",
    ]
    rows = [
        [
            r["path"],
            r["requests"],
            r["threads"],
            r["wall_seconds_median"],
            r["requests_per_second"],
            r["percent_of_ideal"],
            "yes" if r["target_met"] else "NO",
            r["client_cpu_ms_per_request"],
            r["server_cpu_ms_per_request"],
            r["server_max_in_flight"],
        ]
        for r in t
    ]
    lines = [
        f"## 1. Throughput at {LATENCY * 1000:.0f} ms latency, concurrency {CONCURRENCY} (ideal {IDEAL:.0f} req/s)",
        common.table(head, rows)[1],
    ]
    lines += [
        "b: 64 distinct images in turn; the warm-up sent each once, so a per-image cache, if the backend "
        "has one, is warm (as in every model stage after the first). c: each repeat starts with all the "
        "cache entries the stage itself creates deleted, as for the first model stage of a run."
    ]
    lines += [r["note"] for r in t if r.get("note")]
    lines += [
        "Client-process CPU per request, measured one call at a time against the same fake server at zero "
        "latency (the client is one Python process: above ~1 CPU-second per second it is GIL-bound, so "
        "160 req/s needs well under 1000/160 = 6.25 ms per request):",
        common.table(
            ["what (single thread)", "client CPU ms per call"],
            [[name, value] for name, value in data["cpu_breakdown_ms"].items()],
        )[1],
    ]
    return lines


def failures_section(data: dict) -> list[str]:
    t, f = data["throughput"], data["failures"]["summary"]
    head = ["metric", "value", "target"]
    rows = [
        ["images in", f["images"], ""],
        ["items through the 5 model stages", f["items_through_model_stages"], ""],
        ["items lost (no work record / decision)", f["lost"], "0"],
        ["items dropped as model errors", f["model_error_drops"], "0"],
        ["duplicate ids in kept.jsonl (any stage)", f["duplicate_kept_ids"], "0"],
        ["chat requests sent", f["requests_sent"], ""],
        ["answered 200 (unique bodies)", f"{f['ok']} ({f['ok_unique_bodies']})", ""],
        ["200s needed without faults", f["ok_without_faults"], ""],
        ["retries (requests - 200s)", f["retries"], ""],
        ["statuses", ", ".join(f"{k}: {v}" for k, v in sorted(f["statuses"].items())), ""],
        ["client-wide pauses (429)", f"{f['pauses']} ({f['paused_seconds']:.1f} s paused)", ""],
        [
            "model stages seconds (vs fault-free)",
            f"{f['model_stage_seconds']:.1f} ({f['model_stage_seconds_without_faults']:.1f})",
            "",
        ],
        ["final ids identical to fault-free run", f["final_ids_equal_fault_free"], "True"],
    ]
    lines = [
        "## 2. 10% failures (5% 429 Retry-After 0.1 s, 5% 500), whole multiverse recipe",
        common.table(head, rows)[1],
        f"Targets (0 lost, 0 duplicates): {'met' if f['targets_met'] else 'NOT met'}.",
    ]
    sched = data["failures"]["scheduling"]
    a_rate = t[0]["requests_per_second"]
    lines += [
        f"Where the time goes under these faults: {sched['requests']} tiny requests through the client alone "
        f"(fault-free rate: {a_rate:.0f} req/s, 1a):",
        common.table(
            ["scheduling", "req/s", "429 pauses", "s paused (all requests)"],
            [[name, r["requests_per_second"], r["pauses"], r["paused_seconds"]] for name, r in sched["rows"].items()],
        )[1],
    ]
    return lines


def sigkill_section(k: dict) -> list[str]:
    rows = [
        ["driver", k["driver"], ""],
        ["images / latency / concurrency", f"{k['images']} / {k['latency_seconds']} s / {k['concurrency']}", ""],
        [
            "killed in",
            f"{k['kill_stage']} at {k['kill_stage_answered_before_kill']} of "
            f"{k['kill_stage_requests_expected']} answered ({k['seconds_to_kill']:.1f} s in)",
            "",
        ],
        ["requests: uninterrupted run", k["reference_requests"], ""],
        [
            "requests: answered before kill + after it (to the dead client) + rerun",
            f"{k['requests_before_kill']} + {k['answered_after_kill_to_the_dead_client']} + {k['requests_rerun']} "
            f"= {k['requests_total']}",
            "",
        ],
        ["extra requests vs uninterrupted", k["extra_requests_vs_reference"], ""],
        ["rerun repeated a body answered 200 before the kill", k["repeated_answered_before_kill"], "0"],
        ["  their age at the kill (ms)", ", ".join(f"{age:.0f}" for age in k["repeated_age_at_kill_ms"]) or "-", ""],
        ["  of which answered > 0.5 s before the kill", k["repeated_answered_over_half_a_second_before_kill"], "0"],
        ["release items (uninterrupted)", f"{k['release_items']} ({k['reference_release_items']})", ""],
        ["release sample ids match uninterrupted run", k["release_matches_reference"], "True"],
        ["wall s: uninterrupted / rerun", f"{k['reference_seconds']:.1f} / {k['rerun_seconds']:.1f}", ""],
    ]
    return [
        "## 3. SIGKILL halfway, rerun with the same --run-id",
        common.table(["metric", "value", "target"], rows)[1],
        f"Target (no body answered before the kill is sent again, release identical): strictly "
        f"{'met' if k['strict_zero_repeats'] and k['release_matches_reference'] else 'NOT met'}; not counting "
        f"replies answered in the last {REPLY_WINDOW * 1000:.0f} ms before the kill (on their way to the "
        f"client, or not yet written to the cache when it died): {'met' if k['target_met'] else 'NOT met'}.",
    ]


def cache_section(c: dict, repeats: int) -> list[str]:
    rows = [[name, us] for name, us in c["parts_us_per_call"].items()]
    return [
        f"## 4. Fully cached rerun: {c['calls']:,} `complete` calls ({c['distinct_images']} distinct "
        f"{c['image_px'][0]}x{c['image_px'][1]} PNGs)",
        f"Fill: {c['replies_stored']:,} replies stored in {c['fill_seconds']:.1f} s "
        f"({c['fill_calls_per_second_32_threads']:.0f} calls/s, 32 threads, zero latency). Cached rerun: "
        f"**{c['complete_us_per_call_median']:.0f} us per call** single-threaded "
        f"({c['cached_calls_per_second_32_threads']:.0f} calls/s from 32 threads); requests sent during "
        f"the rerun: {c['requests_sent_during_cached_rerun']}; cached calls recorded over the "
        f"{repeats} timed pass(es): {c['cached_calls_recorded']:,}.",
        common.table(["part (single thread)", "us per call"], rows)[1],
        image_sentence(c),
    ]


def image_sentence(c: dict) -> str:
    if "image_part_share_of_hit" not in c:  # results written before the payload cache existed
        return (
            f"`build()` encoded the image as a JPEG data URL on every call, also when the reply was cached "
            f"(the key only uses the image sha256 and the sent size): "
            f"{pct(c['image_encoding_share_of_hit']):.0f}% of a cache hit."
        )
    share = pct(c["image_part_share_of_hit"])
    if c["image_encoded_on_every_hit"]:
        return (
            f"`build()` encodes the image as a JPEG on every call, also when the reply is cached (the key only "
            f"uses the image sha256 and the sent size): the image part is {share:.0f}% of a cache hit."
        )
    return (
        f"`build()` no longer re-encodes the image on a hit ({c['jpeg_encodes_per_cached_build']:.2f} JPEG "
        f"encodes per cached build); the image part is still {share:.0f}% of a cache hit: the stored payload is "
        f"read and base64-encoded into a data URL that a hit never sends (the key only needs the sha256 and "
        f"the sent size)."
    )


def render() -> None:
    """Rewrite model_layer.md from the saved model_layer.json (after a change to the report only)."""
    data = json.loads((common.RESULTS / "model_layer.json").read_text())
    (common.RESULTS / "model_layer.md").write_text(report(data, False).rstrip() + "\n", encoding="utf-8")


def main() -> None:
    parser = common.arguments(__doc__, "a wave or two of requests per path, runs of 8 images, 1 repeat")
    parser.add_argument("--only", default="1,2,3,4", help="scenarios to run, e.g. 1,4 (writes nothing)")
    parser.add_argument("--render", action="store_true", help="rewrite the .md from the saved .json, no runs")
    args = parser.parse_args()
    if args.render:
        return render()
    cfg = QUICK if args.quick else FULL
    only = set(args.only.split(","))
    data: dict = {
        "benchmark": "model_layer",
        "quick": args.quick,
        "machine": common.machine("openai", "httpx", "pydantic"),
        "repeats": cfg["repeats"],
        "config": cfg,
        "latency_seconds": LATENCY,
        "concurrency": CONCURRENCY,
        "ideal_rps": IDEAL,
    }
    started = time.monotonic()
    data["code_at_start"] = common.code_fingerprint()
    data["started_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    sections = {
        "throughput": (
            "1",
            lambda: [
                bench_client(cfg),
                bench_backend(cfg, common.scratch("backend-")),
                *bench_stage(cfg, common.scratch("stage-")),
            ],
        ),
        "cpu_breakdown_ms": ("1", lambda: bench_cpu_breakdown(cfg, common.scratch("cpu-"))),
        "failures": ("2", lambda: bench_failures(cfg, common.scratch("faults-"))),
        "sigkill": ("3", lambda: bench_sigkill(cfg, common.scratch("sigkill-"))),
        "cache": ("4", lambda: bench_cache(cfg, common.scratch("cache-"))),
    }
    data["section_seconds"] = {}
    for name, (scenario, run) in sections.items():
        if scenario in only:
            data["section_seconds"][name], data[name] = common.timed(run)
            print(
                f"{name} ({data['section_seconds'][name]:.0f} s): {json.dumps(data[name], default=str)[:2000]}",
                flush=True,
            )
    data["total_seconds"] = time.monotonic() - started
    data["code_at_end"] = common.code_fingerprint()
    data["code_changed_during_run"] = data["code_at_end"] != data["code_at_start"]
    if only == {"1", "2", "3", "4"}:
        markdown = report(data, args.quick)
        print("\n" + markdown + "\n")
        common.publish("model_layer", data, markdown, args.quick)
    print(f"{data['total_seconds']:.0f} s in all")


if __name__ == "__main__":
    main()
