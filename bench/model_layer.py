"""Model layer: client and backend throughput, failures, a SIGKILLed run resumed, and the reply cache's overhead.

Everything runs against the fake OpenAI server (tests/fakes/openai_server.py), never a paid API.

1. Throughput at 200 ms latency and concurrency 32, against the ideal concurrency / latency = 160 requests/s:
   a. client alone: `shared_client(..., concurrency=32).create` from 64 threads (more than 32, so the semaphore
      and not the caller is the limit), tiny text requests;
   b. backend path: `OpenAIBackend.complete` with the image_quality prompt and a small image (256x192 PNG,
      distinct seeds so nothing is cached) from 32 threads, with the sqlite reply cache;
   c. a real stage: image_quality over generated 256x192 images with backend.concurrency=32, timing only
      `curation.runner.run_stage` of that stage (earlier stages run once, untimed).
   The fake server runs in a separate process (this script with --serve) so its threads do not take the GIL
   from the client. CPU seconds of both processes are reported per request.
2. 10% failures: 429 (Retry-After 0.1) on every 20th request and 500 on every other 10th (5% each); the whole
   multiverse recipe (`run_all`) over ~300 images at 200 ms and concurrency 32, and a fault-free run for
   reference: items lost (input items without a decision), items recorded as model errors, duplicate ids in
   kept.jsonl, requests sent vs successful calls, client-wide pauses.
3. SIGKILL halfway, rerun: `curate run` (the CLI, temporary Prefect server) as a subprocess against an
   in-process fake server; the process group is SIGKILLed when half the conversation_generate requests were
   answered; the same command is run again (same --run-id). Counts requests whose canonical JSON body had
   already been answered 200 before the kill, and compares the release's sample ids with an uninterrupted run.
   (--quick runs the runner in a subprocess, `run_all` + `write_release`, instead of the CLI, to stay short.)
4. Cache overhead: 10,000 replies stored through the real backend (zero latency), then 10,000 `complete` calls
   that all hit the cache (single thread, median of 3), split into request building (prompt, image data URL,
   strict schema, key hash) and the lookup (sqlite, JSON, pydantic validation).

    cd /work/main && .venv/bin/python bench/model_layer.py [--quick]
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import hashlib
import io
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (sets HOME etc. to a temp dir before anything else is imported)

import psutil  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from tests.fakes import openai_server as fake_module  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Fault, _Reply  # noqa: E402

LATENCY = 0.2
CONCURRENCY = 32
IDEAL = CONCURRENCY / LATENCY
TARGET_SHARE = 0.90
LISTEN_BACKLOG = 128
IMAGE_SIZE = (256, 192)
PYTHON = sys.executable
CURATE = Path(sys.executable).parent / "curate"
SCRIPT = Path(__file__).resolve()

FULL = {"n_client": 2000, "n_backend": 2000, "n_stage": 1000, "n_faults": 300, "kill_images": 200,
        "kill_latency": 0.1, "kill_concurrency": 8, "n_cache": 10_000, "cache_images": 200, "repeats": 3}
QUICK = {"n_client": 320, "n_backend": 320, "n_stage": 160, "n_faults": 40, "kill_images": 40,
         "kill_latency": 0.05, "kill_concurrency": 8, "n_cache": 1000, "cache_images": 50, "repeats": 1}


# ================================================================================================ fake server

def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def scripted(body: dict) -> object | None:
    """Well-formed conversations and checklists (so they pass the stages' checks); else a schema instance."""
    name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if name == "ConversationReply":
        return {"utterances": [{"speaker": speaker, "text": f"{speaker} says something about turn {index}"}
                               for index, speaker in enumerate(["user", "assistant"] * 4)]}
    if name == "ChecklistReply":
        return {"checklists": [{"user_turn": turn, "items": [
            {"question": f"Does answer {turn} use the image?", "main_criteria": "Perceptual Understanding",
             "sub_criteria": "grounding"}]} for turn in range(1, 5)]}
    return None


FAULT_MIXES = {
    "none": [],
    # every 20th request a 429 with Retry-After 0.1, every other 10th a 500 (periodic faults are checked in order,
    # so at multiples of 20 the 429 wins): 5% + 5% = 10%
    "ten_percent": [Fault(kind="status", status=429, retry_after="0.1", every=20),
                    Fault(kind="status", status=500, every=10)],
}


class BenchServer(FakeOpenAIServer):
    """The fake server, plus a log of chat replies (body digest, status, time answered, schema name), GET
    /bench/stats and POST /bench/reset; request bodies are not kept (images would pile up in memory)."""

    def __init__(self, **options):
        super().__init__(**options)
        self.log: list[tuple[str, int, float, str | None]] = []
        self.total_requests = 0

    def _respond(self, request, raw=b""):
        path = urlsplit(request.path).path
        if path == "/bench/stats":
            return _Reply(200, self.stats())
        if path == "/bench/reset":
            with self._lock:
                self.log, self._max_in_flight, self.total_requests = [], 0, 0
                self._completions_served = 0
            return _Reply(200, {"reset": True})
        reply = super()._respond(request, raw)
        with self._lock:
            self.total_requests += 1
            self._requests.clear()
        return reply

    def _chat(self, body):
        digest = hashlib.sha256(canonical(body).encode()).hexdigest()
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name") \
            if isinstance(body, dict) else None
        reply = super()._chat(body)
        with self._lock:
            self.log.append((digest, 0 if reply is None else reply.status, time.monotonic(), name))
        return reply

    def stats(self) -> dict:
        with self._lock:
            log = list(self.log)
            max_in_flight, total = self._max_in_flight, self.total_requests
        ok = [digest for digest, status, _, _ in log if status == 200]
        return {"chat_requests": len(log), "all_requests": total, "max_in_flight": max_in_flight,
                "statuses": dict(Counter(str(status) for _, status, _, _ in log)),
                "ok": len(ok), "ok_unique_bodies": len(set(ok)),
                "ok_by_schema": dict(Counter(name for _, status, _, name in log if status == 200)),
                "cpu_seconds": round(sum(psutil.Process().cpu_times()[:2]), 3)}


def serve(latency: float, faults: str, responder: str) -> None:
    """Foreground server for the other process; prints its base URL, stops on SIGTERM."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with BenchServer(latency_seconds=latency, faults=list(FAULT_MIXES[faults]),
                     responder=scripted if responder == "scripted" else None) as server:
        print(server.base_url, flush=True)
        while not done.wait(0.5):
            pass


class ServerProcess:
    """`python bench/model_layer.py --serve ...` in its own process; stats and reset over HTTP."""

    def __init__(self, latency: float, faults: str = "none", responder: str = "none"):
        self.process = subprocess.Popen(
            [PYTHON, str(SCRIPT), "--serve", "--latency", str(latency), "--faults", faults, "--responder", responder],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.stop()
            raise RuntimeError("the fake server process did not start")
        self.root = self.base_url.removesuffix("/v1")

    def _call(self, path: str, method: str = "GET") -> dict:
        request = urllib.request.Request(self.root + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stats(self) -> dict:
        return self._call("/bench/stats")

    def reset(self) -> None:
        self._call("/bench/reset", "POST")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ================================================================================================ helpers

def make_image(path: Path, seed: int, size: tuple[int, int] = IMAGE_SIZE) -> Path:
    """A deterministic small PNG: coloured rectangles and lines drawn from `seed`."""
    rng = random.Random(seed)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
        x1, y1 = x0 + rng.randrange(20, size[0] // 2), y0 + rng.randrange(20, size[1] // 2)
        draw.rectangle([x0, y0, x1, y1], fill=tuple(rng.randrange(256) for _ in range(3)))
        draw.line([rng.randrange(size[0]), 0, rng.randrange(size[0]), size[1]], fill=(0, 0, 0), width=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def make_images(folder: Path, count: int, first_seed: int = 0) -> list[Path]:
    return [make_image(folder / f"img-{seed:05d}.png", seed) for seed in range(first_seed, first_seed + count)]


def image_refs(paths: list[Path]):
    from curation.fingerprint import sha256_file
    from schemas import ImageRef
    refs = []
    for path in paths:
        with Image.open(path) as image:
            width, height, fmt = image.width, image.height, image.format
        refs.append(ImageRef(path=str(path), sha256=sha256_file(path), size_bytes=path.stat().st_size,
                             width=width, height=height, format=fmt))
    return refs


def cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


def pct(value: float) -> float:
    return 100.0 * value


def scratch(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ["BENCH_HOME"]))


def backend_spec(base_url: str, **updates):
    from schemas import BackendSpec
    return BackendSpec(kind="openai", base_url=base_url, model="fake-vlm", **updates)


def model_requests(refs, count: int, first_seed: int):
    from curation.models.base import ModelRequest
    from curation.prompting import load_prompt
    prompt = load_prompt("image_quality", 1)
    return [ModelRequest(prompt=prompt, variables={}, images=(refs[n % len(refs)],), seed=first_seed + n)
            for n in range(count)]


# ================================================================================================ 1. throughput

def throughput_row(name: str, requests: int, seconds: list[float], client_cpu: list[float], server: dict,
                   threads: int) -> dict:
    wall = common.median(seconds)
    rate = requests / wall
    return {"path": name, "requests": requests, "threads": threads, "wall_seconds_all": seconds,
            "wall_seconds_median": wall, "requests_per_second": rate, "percent_of_ideal": pct(rate / IDEAL),
            "target_met": rate >= TARGET_SHARE * IDEAL,
            "client_cpu_ms_per_request": 1000 * common.median(client_cpu) / requests,
            "server_cpu_ms_per_request": 1000 * server["cpu_seconds_per_repeat"] / requests,
            "server_max_in_flight": server["max_in_flight"], "server_statuses": server["statuses"]}


def run_repeats(server: ServerProcess, repeats: int, once) -> tuple[list[float], list[float], dict]:
    """`once(repeat)` timed `repeats` times; wall seconds, client CPU seconds, server counters (all repeats)."""
    seconds, cpu = [], []
    server.reset()
    cpu_server_before = server.stats()["cpu_seconds"]
    for repeat in range(repeats):
        cpu_before = cpu_seconds()
        elapsed, _ = common.timed(lambda: once(repeat))
        seconds.append(elapsed)
        cpu.append(cpu_seconds() - cpu_before)
    stats = server.stats()
    stats["cpu_seconds_per_repeat"] = (stats["cpu_seconds"] - cpu_server_before) / repeats
    return seconds, cpu, stats


def bench_client(cfg: dict) -> dict:
    from curation.models.client import shared_client
    n, threads = cfg["n_client"], 2 * CONCURRENCY
    with ServerProcess(LATENCY) as server:
        client = shared_client(server.base_url, "sk-bench", concurrency=CONCURRENCY, timeout_seconds=60,
                               max_attempts=1)

        def body(n_: int) -> dict:
            return {"model": "fake-vlm", "messages": [{"role": "user", "content": f"say something {n_}"}],
                    "max_tokens": 32, "seed": n_}

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(client.create, [body(-k - 1) for k in range(2 * CONCURRENCY)]))  # open the connections

            def once(repeat: int) -> None:
                replies = list(pool.map(client.create, [body(repeat * n + k) for k in range(n)]))
                assert len(replies) == n and all(reply.attempts == 1 for reply in replies)

            seconds, cpu, stats = run_repeats(server, cfg["repeats"], once)
    return throughput_row("a. client alone (ChatClient.create)", n, seconds, cpu, stats, threads)


def bench_backend(cfg: dict, work: Path) -> dict:
    from curation.cache import Cache
    from curation.models.openai_backend import OpenAIBackend
    n = cfg["n_backend"]
    refs = image_refs(make_images(work / "images", 64, first_seed=10_000))
    with ServerProcess(LATENCY) as server:
        backend = OpenAIBackend(backend_spec(server.base_url, concurrency=CONCURRENCY, max_retries=0),
                                cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(backend.complete, model_requests(refs, 2 * CONCURRENCY, 10 ** 8)))  # warm-up

            def once(repeat: int) -> None:
                results = list(pool.map(backend.complete, model_requests(refs, n, repeat * n)))
                assert len(results) == n

            seconds, cpu, stats = run_repeats(server, cfg["repeats"], once)
    assert stats["ok"] == n * cfg["repeats"], stats  # nothing came from the cache
    return throughput_row("b. backend (OpenAIBackend.complete, cache on)", n, seconds, cpu, stats, CONCURRENCY)


def stage_run(work: Path, images: Path, base_url: str, run_id: str, backend: dict, overrides: dict | None = None):
    from curation.recipes import resolve_run
    from curation.runner import RunStore
    settings = {"image_quality": {"min_quality_score": 1}, "category_min_size": {"min_items_per_category": 1},
                "backend": backend, **(overrides or {})}
    config = resolve_run("multiverse", out_dir=work / "out", input_path=str(images), run_id=run_id,
                         backend="openai", base_url=base_url, model="fake-vlm", overrides=settings)
    store = RunStore(work / "out" / "runs" / run_id)
    store.save_config(config)
    return store


def bench_stage(cfg: dict, work: Path) -> dict:
    import shutil

    from curation.runner import cache_path, run_stage
    n = cfg["n_stage"]
    images = work / "images"
    make_images(images, n)
    with ServerProcess(LATENCY) as server:
        store = stage_run(work, images, server.base_url, "stage",
                          {"concurrency": CONCURRENCY, "max_retries": 0})
        for index in range(4):  # ingest, exact dedup, phash, near dedup: untimed
            run_stage(store.root, index)
        quality = next(i for i, spec in enumerate(store.load_config().recipe.stages) if spec.stage == "image_quality")
        items: list[int] = []

        def once(repeat: int) -> None:
            shutil.rmtree(store.stage_folder(quality, "image_quality"), ignore_errors=True)
            with sqlite3.connect(cache_path(store.root)) as db:
                db.execute("DELETE FROM entries WHERE namespace='model_reply'")
            stats = run_stage(store.root, quality)
            items.append(stats.items_in)

        seconds, cpu, stats = run_repeats(server, cfg["repeats"], once)
    assert stats["ok"] == sum(items), (stats, items)
    row = throughput_row("c. stage image_quality (runner.run_stage)", items[0], seconds, cpu, stats, CONCURRENCY)
    row["note"] = f"{n} images generated, {items[0]} left after near-dedup go to image_quality"
    return row


# ================================================================================================ 2. failures

MODEL_STAGES = ("image_quality", "image_category", "persona_generate", "conversation_generate",
                "checklist_generate")


def read_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def audit_run(store) -> dict:
    """Per model stage: input items, decisions, items without a decision, model-error drops, duplicates."""
    state = store.load_state()
    rows, all_dupes = {}, 0
    for index, entry in enumerate(state):
        output = Path(entry["output_dir"])
        kept = read_ids(output / "kept.jsonl")
        dupes = len(kept) - len(set(kept))
        all_dupes += dupes
        if entry["stage"] not in MODEL_STAGES:
            continue
        source = read_ids(Path(state[index - 1]["output_dir"]) / "kept.jsonl")
        work = next(output.parent.glob("work-*/work.jsonl"))
        records = [json.loads(line) for line in work.read_text(encoding="utf-8").splitlines() if line.strip()]
        worked = Counter(record["item_id"] for record in records)
        decisions = [json.loads(line) for line in (output / "decisions.jsonl").read_text().splitlines() if line]
        rows[entry["stage"]] = {
            "items_in": len(source), "work_records": len(records), "decisions": len(decisions),
            "lost": sum(1 for item in source if item not in worked),
            "worked_twice": sum(1 for count in worked.values() if count > 1),
            "model_error_drops": sum(1 for record in records if "error" in record),
            "kept": len(kept), "duplicate_kept_ids": dupes}
    final = read_ids(Path(state[-1]["output_dir"]) / "kept.jsonl")
    return {"stages": rows, "duplicate_kept_ids_any_stage": all_dupes, "final_ids": final,
            "stages_done": len(state), "complete": len(state) == len(store.load_config().recipe.stages)}


class PauseMeter:
    """Counts ChatClient._pause calls and the wall time the client spent paused (wraps the method, same effect)."""

    def __init__(self):
        from curation.models.client import ChatClient
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
    from curation.models import client as client_module
    from curation.runner import run_all
    n = cfg["n_faults"]
    images = work / "images"
    make_images(images, n, first_seed=20_000)
    results = {}
    for mix in ("none", "ten_percent"):
        with ServerProcess(LATENCY, faults=mix, responder="scripted") as server:
            store = stage_run(work / mix, images, server.base_url, f"faults-{mix}",
                              {"concurrency": CONCURRENCY, "max_retries": 5})
            with PauseMeter() as meter:
                elapsed, done = common.timed(lambda: run_all(store.root))
            stats = server.stats()
            clients = [c for key, c in client_module._CLIENTS.items() if key[0] == server.base_url]
            audit = audit_run(store)
            model_seconds = sum(s.seconds for s in done if s.stage in MODEL_STAGES)
        results[mix] = {"wall_seconds": elapsed, "model_stage_seconds": model_seconds, "server": stats,
                        "client_requests_sent": sum(c.requests_sent for c in clients),
                        "pauses": meter.calls, "paused_seconds": meter.paused_seconds(), "audit": audit}
    base, faulty = results["none"], results["ten_percent"]
    stages = faulty["audit"]["stages"]
    summary = {
        "images": n, "items_through_model_stages": sum(r["items_in"] for r in stages.values()),
        "lost": sum(r["lost"] for r in stages.values()),
        "model_error_drops": sum(r["model_error_drops"] for r in stages.values()),
        "duplicate_kept_ids": faulty["audit"]["duplicate_kept_ids_any_stage"],
        "requests_sent": faulty["server"]["chat_requests"], "ok": faulty["server"]["ok"],
        "ok_unique_bodies": faulty["server"]["ok_unique_bodies"],
        "retries": faulty["server"]["chat_requests"] - faulty["server"]["ok"],
        "statuses": faulty["server"]["statuses"], "ok_without_faults": base["server"]["ok"],
        "final_ids_equal_fault_free": faulty["audit"]["final_ids"] == base["audit"]["final_ids"],
        "final_items": len(faulty["audit"]["final_ids"]),
        "model_stage_seconds": faulty["model_stage_seconds"], "model_stage_seconds_without_faults":
            base["model_stage_seconds"], "pauses": faulty["pauses"], "paused_seconds": faulty["paused_seconds"],
        "complete": faulty["audit"]["complete"]}
    summary["targets_met"] = summary["lost"] == 0 and summary["duplicate_kept_ids"] == 0
    for run in results.values():
        run["audit"].pop("final_ids")
    return {"summary": summary, "runs": results}


# ================================================================================================ 3. SIGKILL

def curate_env() -> dict:
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_UI_ENABLED": "false",
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    for name in ("PREFECT_API_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    return env


def run_command(out: Path, images: Path, base_url: str, run_id: str, cfg: dict, use_cli: bool) -> list[str]:
    if use_cli:
        return [str(CURATE), "run", "multiverse", "--input", str(images), "--backend", "openai", "--base-url",
                base_url, "--model", "fake-vlm", "--run-id", run_id, "--out", str(out), "--progress", "none",
                "--concurrency", str(cfg["kill_concurrency"]),
                "--set", "image_quality.min_quality_score=1", "--set", "category_min_size.min_items_per_category=1"]
    return [PYTHON, str(SCRIPT), "--child-run", str(out), str(images), base_url, run_id,
            str(cfg["kill_concurrency"])]


def child_run(out: str, images: str, base_url: str, run_id: str, concurrency: str) -> None:
    """The runner without Prefect (for --quick): what `curate run` does, resolve, run every stage, release."""
    from curation.release.writer import write_release
    from curation.runner import run_all
    store = stage_run(Path(out), Path(images), base_url, run_id, {"concurrency": int(concurrency)})
    # stage_run puts runs under <work>/out; keep the CLI's layout <out>/runs by passing out's parent
    run_all(store.root)
    write_release(store.root, store.root.parent.parent)


def release_ids(out: Path) -> list[str]:
    import pyarrow.parquet as pq
    files = sorted(out.rglob("releases/*/*/data/*.parquet"))
    if not files:
        return []
    return sorted(pq.read_table(files[-1], columns=["index"]).column("index").to_pylist())


def stop_tree(process: subprocess.Popen, sig: int) -> list[int]:
    """Send `sig` to the process group we started, then to any descendant that left it; their pids."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
    for child in descendants:
        try:
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                child.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
    return [child.pid for child in descendants]


def bench_sigkill(cfg: dict, work: Path, use_cli: bool) -> dict:
    images = work / "images"
    make_images(images, cfg["kill_images"], first_seed=30_000)
    env, stage, schema = curate_env(), "conversation_generate", "ConversationReply"
    logs = work / "logs"
    logs.mkdir()

    def launch(out: Path, server: BenchServer, name: str) -> subprocess.Popen:
        handle = open(logs / f"{name}.log", "w")
        return subprocess.Popen(run_command(out, images, server.base_url, "killme", cfg, use_cli), cwd=work,
                                env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)

    def finish(process: subprocess.Popen, name: str, timeout: float = 600) -> float:
        start = time.monotonic()
        try:
            process.wait(timeout=timeout)
        finally:
            stop_tree(process, signal.SIGKILL)
        if process.returncode != 0:
            raise RuntimeError(f"{name} exited {process.returncode}:\n{(logs / f'{name}.log').read_text()[-3000:]}")
        return time.monotonic() - start

    # an uninterrupted run for reference
    with BenchServer(latency_seconds=cfg["kill_latency"], responder=scripted) as server:
        start = time.monotonic()
        finish(launch(work / "reference", server, "reference"), "reference")
        reference_seconds = time.monotonic() - start
        reference = server.stats()
    reference_ids = release_ids(work / "reference")
    expected = reference["ok_by_schema"].get(schema, 0)

    with BenchServer(latency_seconds=cfg["kill_latency"], responder=scripted) as server:
        process = launch(work / "killed", server, "killed")
        started = time.monotonic()
        while process.poll() is None:
            answered = sum(1 for _, status, _, name in list(server.log) if status == 200 and name == schema)
            if answered >= expected / 2:
                break
            time.sleep(0.01)
        if process.poll() is not None:
            raise RuntimeError(f"the run ended before the kill point:\n{(logs / 'killed.log').read_text()[-3000:]}")
        kill_time = time.monotonic()
        stop_tree(process, signal.SIGKILL)
        process.wait()
        seconds_to_kill = kill_time - started
        before = list(server.log)
        time.sleep(max(1.0, 3 * cfg["kill_latency"]))  # in-flight requests of the dead client finish server-side
        settled = len(server.log)
        rerun_seconds = finish(launch(work / "killed", server, "rerun"), "rerun")
        log = list(server.log)
    answered_before = {digest: at for digest, status, at, _ in before if status == 200}
    after = log[settled:]
    repeated = [(digest, answered_before[digest]) for digest, _, _, _ in after if digest in answered_before]
    killed_ids = release_ids(work / "killed")
    by_schema_before = Counter(name for _, status, _, name in before if status == 200)
    return {
        "driver": "curate run (CLI, temporary Prefect server)" if use_cli else "runner subprocess (run_all)",
        "images": cfg["kill_images"], "latency_seconds": cfg["kill_latency"], "concurrency": cfg["kill_concurrency"],
        "kill_stage": stage, "kill_stage_requests_expected": expected,
        "kill_stage_answered_before_kill": by_schema_before.get(schema, 0),
        "answered_before_kill_by_schema": dict(by_schema_before),
        "seconds_to_kill": seconds_to_kill, "reference_seconds": reference_seconds, "rerun_seconds": rerun_seconds,
        "reference_requests": reference["chat_requests"],
        "requests_before_kill": len(before), "answered_after_kill_by_dead_client": settled - len(before),
        "requests_rerun": len(after), "requests_total": len(log),
        "repeated_answered_before_kill": len(repeated),
        "repeated_answered_over_half_a_second_before_kill": sum(1 for _, at in repeated if kill_time - at > 0.5),
        "extra_requests_vs_reference": len(log) - reference["chat_requests"],
        "release_items": len(killed_ids), "reference_release_items": len(reference_ids),
        "release_matches_reference": bool(killed_ids) and killed_ids == reference_ids,
        "target_met": not repeated and bool(killed_ids) and killed_ids == reference_ids}


# ================================================================================================ 4. cache overhead

def per_call_us(function, items, repeats: int) -> tuple[float, list[float]]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            function(item)
        seconds.append(time.perf_counter() - start)
    return 1e6 * common.median(seconds) / len(items), seconds


def bench_cache(cfg: dict, work: Path) -> dict:
    from curation.cache import Cache
    from curation.fingerprint import sha256_json
    from curation.images.decode import decode_image
    from curation.models.openai_backend import REPLY_NAMESPACE, OpenAIBackend, strict_schema
    from curation.models.pricing import estimate_input_tokens
    from curation.models.usage import collecting

    n, repeats = cfg["n_cache"], cfg["repeats"]
    refs = image_refs(make_images(work / "images", cfg["cache_images"], first_seed=40_000))
    requests = model_requests(refs, n, 0)
    with ServerProcess(0.0) as server:
        spec = backend_spec(server.base_url, concurrency=CONCURRENCY, max_retries=0)
        filler = OpenAIBackend(spec, cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
            fill_seconds, _ = common.timed(lambda: list(pool.map(filler.complete, requests)))
        filled = server.stats()["ok"]
        # a fresh backend and cache object, as a rerun in a new process would have
        backend = OpenAIBackend(spec, cache=Cache(work / "cache.sqlite"), api_key="sk-bench")
        with collecting() as usage:
            total_us, total_all = per_call_us(backend.complete, requests, repeats)
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
    parts["build (all of it)"], _ = per_call_us(backend.build, requests, repeats)
    parts["  prompt render"], _ = per_call_us(lambda r: r.prompt.render(r.variables), requests, repeats)

    def encode(request):
        picture = decode_image(Path(request.images[0].path)).image
        picture.thumbnail((side, side))
        buffer = io.BytesIO()
        picture.save(buffer, format="JPEG", quality=90)
        return base64.b64encode(buffer.getvalue()).decode()

    parts["  image data URL (decode + thumbnail + JPEG + base64)"], _ = per_call_us(encode, requests, repeats)
    parts["    of which decode_image (file read + PNG decode)"], _ = per_call_us(
        lambda r: decode_image(Path(r.images[0].path)).image, requests, repeats)
    parts["  strict_schema (pydantic JSON schema, every call)"], _ = per_call_us(
        lambda r: strict_schema(r.prompt.output_schema), requests, repeats)
    key_inputs = []
    for request, (body, _, _) in zip(requests, built):
        rendered = request.prompt.render(request.variables)
        size = (request.images[0].width, request.images[0].height)
        key_inputs.append({"base_url": backend.base_url, "prompt_sha256": prompt.sha256,
                           "body": {**body, "messages": [rendered.system, rendered.user]},
                           "images": [[request.images[0].sha256, list(size)]], "image_transport": "data_url"})
    parts["  cache key (canonical JSON + sha256)"], _ = per_call_us(sha256_json, key_inputs, repeats)
    parts["  token estimate"], _ = per_call_us(
        lambda r: estimate_input_tokens([prompt.system, prompt.user], [(r.images[0].width, r.images[0].height)]),
        requests, repeats)
    cache = backend.cache
    parts["lookup: cache.get (sqlite SELECT + json.loads)"], _ = per_call_us(
        lambda key: cache.get(REPLY_NAMESPACE, key), keys, repeats)
    db = cache._connection()
    parts["  of which sqlite SELECT alone"], _ = per_call_us(
        lambda key: db.execute("SELECT value FROM entries WHERE namespace=? AND key=?",
                               (REPLY_NAMESPACE, key)).fetchone(), keys, repeats)
    stored = [cache.get(REPLY_NAMESPACE, key) for key in keys]
    parts["validate reply (pydantic model_validate_json)"], _ = per_call_us(
        lambda value: prompt.output_schema.model_validate_json(value["content"]), stored, repeats)
    with collecting():
        parts["_cached (lookup + validate + usage record)"], _ = per_call_us(
            lambda pair: backend._cached(pair[1], pair[0], "fake-vlm"), list(zip(requests, keys)), repeats)
    encode_us = parts["  image data URL (decode + thumbnail + JPEG + base64)"]
    return {"calls": n, "distinct_images": len(refs), "image_px": list(IMAGE_SIZE),
            "fill_seconds": fill_seconds, "fill_calls_per_second_32_threads": n / fill_seconds,
            "replies_stored": filled, "requests_sent_during_cached_rerun": sent_during_hits,
            "cached_calls_recorded": cached_calls, "complete_us_per_call_median": total_us,
            "complete_seconds_all": total_all, "cached_calls_per_second_32_threads": n / threaded_seconds,
            "parts_us_per_call": parts, "image_encoding_share_of_hit": encode_us / total_us,
            "image_encoded_on_every_hit": True}


# ================================================================================================ report

def machine() -> dict:
    from importlib.metadata import version
    info = common.machine()
    info.update({"openai": version("openai"), "httpx": version("httpx"), "pydantic": version("pydantic")})
    return info


def report(data: dict, quick: bool) -> str:
    m = data["machine"]
    lines = [f"# Model layer{' (quick)' if quick else ''}",
             f"Machine: {common.machine_line(m)}; openai {m['openai']}, httpx {m['httpx']}, pydantic "
             f"{m['pydantic']}. Only 2 cores: client, fake server (separate process) and sqlite share them.",
             f"Fake server: tests/fakes/openai_server.py, in its own process for 1, 2 and 4. Timings are the "
             f"median of {data['repeats']} run(s) where repeated."]
    t = data["throughput"]
    head = ["path", "requests", "threads", "wall s", "req/s", "% of ideal", ">= 90%", "client CPU ms/req",
            "server CPU ms/req", "server max in flight"]
    rows = [[r["path"], r["requests"], r["threads"], r["wall_seconds_median"], r["requests_per_second"],
             r["percent_of_ideal"], "yes" if r["target_met"] else "NO", r["client_cpu_ms_per_request"],
             r["server_cpu_ms_per_request"], r["server_max_in_flight"]] for r in t]
    lines += [f"## 1. Throughput at {LATENCY * 1000:.0f} ms latency, concurrency {CONCURRENCY} "
              f"(ideal {IDEAL:.0f} req/s)", common.table(head, rows)[1]]
    notes = [r["note"] for r in t if r.get("note")]
    lines += notes
    f = data["failures"]["summary"]
    head = ["metric", "value", "target"]
    rows = [["images in", f["images"], ""], ["items through the 5 model stages", f["items_through_model_stages"], ""],
            ["items lost (no work record / decision)", f["lost"], "0"],
            ["items dropped as model errors", f["model_error_drops"], "0"],
            ["duplicate ids in kept.jsonl (any stage)", f["duplicate_kept_ids"], "0"],
            ["chat requests sent", f["requests_sent"], ""],
            ["answered 200 (unique bodies)", f"{f['ok']} ({f['ok_unique_bodies']})", ""],
            ["200s needed without faults", f["ok_without_faults"], ""],
            ["retries (requests - 200s)", f["retries"], ""],
            ["statuses", ", ".join(f"{k}: {v}" for k, v in sorted(f["statuses"].items())), ""],
            ["client-wide pauses (429)", f"{f['pauses']} ({f['paused_seconds']:.1f} s paused)", ""],
            ["model stages seconds (vs fault-free)",
             f"{f['model_stage_seconds']:.1f} ({f['model_stage_seconds_without_faults']:.1f})", ""],
            ["final ids identical to fault-free run", f["final_ids_equal_fault_free"], "True"]]
    lines += ["## 2. 10% failures (5% 429 Retry-After 0.1 s, 5% 500), whole multiverse recipe",
              common.table(head, rows)[1],
              f"Targets (0 lost, 0 duplicates): {'met' if f['targets_met'] else 'NOT met'}."]
    k = data["sigkill"]
    rows = [["driver", k["driver"], ""], ["images / latency / concurrency",
                                          f"{k['images']} / {k['latency_seconds']} s / {k['concurrency']}", ""],
            ["killed in", f"{k['kill_stage']} at {k['kill_stage_answered_before_kill']} of "
                          f"{k['kill_stage_requests_expected']} answered ({k['seconds_to_kill']:.1f} s in)", ""],
            ["requests: uninterrupted run", k["reference_requests"], ""],
            ["requests: before kill + rerun", f"{k['requests_before_kill']} + {k['requests_rerun']} = "
                                              f"{k['requests_total']}", ""],
            ["extra requests vs uninterrupted", k["extra_requests_vs_reference"], ""],
            ["rerun repeated a body answered 200 before the kill", k["repeated_answered_before_kill"], "0"],
            ["  of which answered > 0.5 s before the kill", k["repeated_answered_over_half_a_second_before_kill"], "0"],
            ["release items (uninterrupted)", f"{k['release_items']} ({k['reference_release_items']})", ""],
            ["release sample ids match uninterrupted run", k["release_matches_reference"], "True"],
            ["wall s: uninterrupted / rerun", f"{k['reference_seconds']:.1f} / {k['rerun_seconds']:.1f}", ""]]
    lines += ["## 3. SIGKILL halfway, rerun with the same --run-id", common.table(["metric", "value", "target"],
                                                                                  rows)[1],
              f"Target: {'met' if k['target_met'] else 'NOT met'}."]
    c = data["cache"]
    rows = [[name, us] for name, us in c["parts_us_per_call"].items()]
    lines += [f"## 4. Fully cached rerun: {c['calls']:,} `complete` calls ({c['distinct_images']} distinct "
              f"{c['image_px'][0]}x{c['image_px'][1]} PNGs)",
              f"Fill: {c['replies_stored']:,} replies stored in {c['fill_seconds']:.1f} s "
              f"({c['fill_calls_per_second_32_threads']:.0f} calls/s, 32 threads, zero latency). Cached rerun: "
              f"**{c['complete_us_per_call_median']:.0f} us per call** single-threaded "
              f"({c['cached_calls_per_second_32_threads']:.0f} calls/s from 32 threads); requests sent during "
              f"the rerun: {c['requests_sent_during_cached_rerun']}; cached calls recorded: "
              f"{c['cached_calls_recorded']:,}.",
              common.table(["part (single thread)", "us per call"], rows)[1],
              f"`build()` encodes the image as a JPEG data URL on every call, also when the reply is cached "
              f"(the key only uses the image sha256 and the sent size): {pct(c['image_encoding_share_of_hit']):.0f}% "
              f"of a cache hit."]
    return "\n\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat, runner instead of the CLI")
    parser.add_argument("--only", default="1,2,3,4", help="scenarios to run, e.g. 1,4")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--faults", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--responder", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--child-run", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.latency, args.faults, args.responder)
    if args.child_run:
        return child_run(*args.child_run)
    cfg = QUICK if args.quick else FULL
    only = set(args.only.split(","))
    data: dict = {"benchmark": "model_layer", "quick": args.quick, "machine": machine(), "repeats": cfg["repeats"],
                  "config": cfg, "latency_seconds": LATENCY, "concurrency": CONCURRENCY, "ideal_rps": IDEAL}
    started = time.monotonic()
    if "1" in only:
        data["throughput"] = [bench_client(cfg)]
        print(data["throughput"][-1])
        data["throughput"].append(bench_backend(cfg, scratch("backend-")))
        print(data["throughput"][-1])
        data["throughput"].append(bench_stage(cfg, scratch("stage-")))
        print(data["throughput"][-1])
    if "2" in only:
        data["failures"] = bench_failures(cfg, scratch("faults-"))
        print(data["failures"]["summary"])
    if "3" in only:
        data["sigkill"] = bench_sigkill(cfg, scratch("sigkill-"), use_cli=not args.quick)
        print(data["sigkill"])
    if "4" in only:
        data["cache"] = bench_cache(cfg, scratch("cache-"))
        print(json.dumps(data["cache"], indent=1))
    data["total_seconds"] = time.monotonic() - started
    if only == {"1", "2", "3", "4"}:
        markdown = report(data, args.quick)
        print("\n" + markdown)
        paths = common.write_results("model_layer" + ("_quick" if args.quick else ""), data, markdown)
        print(f"\nwrote {paths[0]} and {paths[1]} in {data['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
