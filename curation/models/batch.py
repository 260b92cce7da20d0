"""Batch mode: send a stage's uncached requests through the Batch API (half price, results within 24 h).

Flow for one stage: the runner first runs the stage with requests deferred, which collects every request not
already in the reply cache. Here they are written as JSONL shards within the API's limits (at most 50,000
lines and 200 MB per file; we stay under both), uploaded and submitted; batch ids are recorded in the stage's
`batch/` folder as soon as each is created. Polling follows; completed lines are validated and stored in the reply
cache under the same key a direct call would use, so the stage then completes from the cache. Failed lines are
submitted again, up to `MAX_SUBMISSIONS` times per request. If results are not back within the wait, the
stage is *waiting*: nothing is marked done, and the next run resumes polling the recorded batches instead of
submitting again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from benchcurate.curation.core.errors import BackendUnavailable, StageWaiting
from benchcurate.curation.core.files import replacing
from benchcurate.curation.models.identity import with_credentials
from benchcurate.curation.models.pricing import cost_usd, price_for
from benchcurate.schemas import ModelUsage
from benchcurate.schemas.replies import TextReply

MAX_LINES_PER_FILE = 45_000  # the API allows 50,000
MAX_BYTES_PER_FILE = 180_000_000  # the API allows 200 MB
MAX_SUBMISSIONS = 3
FINAL = {"completed", "failed", "expired", "cancelled"}


@dataclass(frozen=True)
class PendingRequest:
    key: str
    body: dict
    output_schema: type
    estimated_cost_usd: float = 0.0


class DeferredToBatch(Exception):
    """Raised by the backend while requests are being collected for a batch: not a failure of the item."""


def shards(requests: list[PendingRequest]) -> list[list[str]]:
    """JSONL lines grouped into files that respect the line and byte limits."""
    files: list[list[str]] = []
    current: list[str] = []
    size = 0
    for request in requests:
        line = json.dumps(
            {"custom_id": request.key, "method": "POST", "url": "/v1/chat/completions", "body": request.body},
            ensure_ascii=False,
        )
        if current and (len(current) >= MAX_LINES_PER_FILE or size + len(line) + 1 > MAX_BYTES_PER_FILE):
            files.append(current)
            current, size = [], 0
        current.append(line)
        size += len(line.encode()) + 1
    if current:
        files.append(current)
    return files


class BatchJobs:
    """The batches of one stage, recorded in `folder/batches.json`, driven to completion across runs."""

    def __init__(self, backend, folder: Path, *, wait_seconds: float, poll_seconds: float):
        self.backend = backend
        self.folder = folder
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds
        import openai  # here, not at the top: an offline run never loads the SDK (0.4 s of imports)

        self._api = openai.OpenAI(
            base_url=with_credentials(backend.base_url),
            api_key=backend._api_key,
            timeout=backend.spec.timeout_seconds,
            max_retries=backend.spec.max_retries,
        )

    @property
    def state_path(self) -> Path:
        return self.folder / "batches.json"

    def _load(self) -> dict:
        if self.state_path.exists():
            return json.loads(self.state_path.read_text(encoding="utf-8"))
        return {"batches": [], "submissions": {}}

    def _save(self, state: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with replacing(self.state_path) as partial:
            partial.write_text(json.dumps(state, indent=2), encoding="utf-8")

    def _submit(self, requests: list[PendingRequest], state: dict, metadata: dict[str, str]) -> None:
        # batch spending is checked once, on the estimate, before anything is submitted
        self.backend.budget.reserve(sum(request.estimated_cost_usd for request in requests))
        for number, lines in enumerate(shards(requests)):
            data = ("\n".join(lines) + "\n").encode()
            uploaded = self._api.files.create(
                file=(f"requests-{len(state['batches'])}-{number}.jsonl", data), purpose="batch"
            )
            batch = self._api.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h", metadata=metadata
            )
            keys = [json.loads(line)["custom_id"] for line in lines]
            state["batches"].append({"id": batch.id, "keys": keys, "status": batch.status, "collected": False})
            for key in keys:
                state["submissions"][key] = state["submissions"].get(key, 0) + 1
            self._save(state)  # recorded at once: a crash after this point resumes polling, never resubmits

    def _collect(self, batch, entry: dict, schemas: dict[str, type], usage: dict[str, ModelUsage]) -> None:
        """Store every valid reply of a finished batch in the reply cache."""
        if not batch.output_file_id:
            return
        for line in self._api.files.content(batch.output_file_id).text.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            response = row.get("response") or {}
            if row.get("error") or response.get("status_code") != 200 or row["custom_id"] not in schemas:
                continue
            body = response["body"]
            content = body["choices"][0]["message"]["content"] or ""
            if len(content) > self.backend.spec.max_reply_chars:
                continue  # left uncached: asked directly, the reply is dropped as model_reply_too_large
            schema = schemas[row["custom_id"]]
            try:
                if schema is not TextReply:  # free text (a judge's verdict) is read when the caller takes it
                    schema.model_validate_json(content)
            except ValidationError:
                continue  # left uncached: the stage asks again directly, with the validation error
            tokens = body.get("usage") or {}
            model = body.get("model") or self.backend.model
            spent = ModelUsage(
                batch_calls=1,
                input_tokens=tokens.get("prompt_tokens", 0),
                output_tokens=tokens.get("completion_tokens", 0),
                cost_usd=cost_usd(
                    price_for(self.backend.spec.model_copy(update={"model": model})),
                    tokens.get("prompt_tokens", 0),
                    tokens.get("completion_tokens", 0),
                    batch=True,
                ),
            )
            usage[model] = usage.get(model, ModelUsage()).plus(spent)
            self.backend.store(row["custom_id"], content, spent)

    def run(self, requests: list[PendingRequest], metadata: dict[str, str]) -> dict[str, ModelUsage]:
        """Submit what is not in flight, poll, collect; return the usage of collected lines, or raise StageWaiting."""
        import openai

        state = self._load()
        wanted = {request.key: request for request in requests}
        in_flight = {key for entry in state["batches"] if not entry["collected"] for key in entry["keys"]}
        fresh = [
            request
            for key, request in wanted.items()
            if key not in in_flight and state["submissions"].get(key, 0) < MAX_SUBMISSIONS
        ]
        try:
            if fresh:
                self._submit(fresh, state, metadata)
            return self._poll(state, {key: request.output_schema for key, request in wanted.items()})
        except (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError) as error:
            raise BackendUnavailable(
                f"batch API at {self.backend.base_url} unreachable ({type(error).__name__}); "
                f"rerun with the same --run-id to resume polling"
            ) from error

    def _poll(self, state: dict, schemas: dict[str, type]) -> dict[str, ModelUsage]:
        usage: dict[str, ModelUsage] = {}
        deadline = time.monotonic() + self.wait_seconds
        while True:
            open_entries = [entry for entry in state["batches"] if not entry["collected"]]
            for entry in open_entries:
                batch = self._api.batches.retrieve(entry["id"])
                entry["status"] = batch.status
                if batch.status in FINAL:
                    self._collect(batch, entry, schemas, usage)
                    entry["collected"] = True
                self._save(state)
            if all(entry["collected"] for entry in state["batches"]):
                return usage
            if time.monotonic() >= deadline:
                running = [entry["id"] for entry in state["batches"] if not entry["collected"]]
                raise StageWaiting(
                    f"{len(running)} batch(es) still running ({', '.join(running[:3])}); rerun "
                    f"with the same --run-id to resume polling (nothing is submitted twice)"
                )
            time.sleep(self.poll_seconds)
