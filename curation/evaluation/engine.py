"""`curate eval`: score a model on a release the way the release's paper scored models.

The model under test and the judge are OpenAI-protocol backends of the model layer (reply cache, retries, costs,
--max-cost), sharing one reply cache under `<out>/cache/`: every reply is stored as it arrives, so an eval that is
interrupted and run again with the same arguments pays for no call twice. Samples are evaluated side by side on
threads (a sample's turns in order: a turn may need the model's earlier answers).

A protocol (one per recipe, `protocols()`) turns one release row into judged turns and the judged turns into the
paper's numbers. Results go to `<out>/<release>/<version>/<model>/`: `judgments.jsonl` (one line per judged
sample and turn, the judge's raw replies kept), `results.json` (`score`, the paper's sub-scores, a 95% interval,
tokens, cost, prompt hashes, the release's checksum hash), and `<out>/<release>/<version>/LEADERBOARD.md`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from benchcurate.curation.cache import Cache
from benchcurate.curation.errors import ModelOutputInvalid, ModelReplyTooLarge, ModelRequestRejected, UserError
from benchcurate.curation.evaluation.release import Release, image_file, open_release, rows
from benchcurate.curation.models.base import ChatTurn, ModelRequest
from benchcurate.curation.models.batch import DeferredToBatch
from benchcurate.curation.models.pricing import Budget
from benchcurate.curation.models.usage import add_usage, collecting
from benchcurate.curation.parallel import ordered_map
from benchcurate.curation.prompting import load_prompt
from benchcurate.curation.store import chunked, write_json_atomic
from benchcurate.schemas import BackendSpec, ImageRef, ModelUsage
from benchcurate.schemas.evaluation import Endpoint, EvalOptions, EvalResults, Interval, Judgment

CALL_FAILURES = (ModelOutputInvalid, ModelRequestRejected, ModelReplyTooLarge)
LEADERBOARD = "LEADERBOARD.md"
MAX_BATCH_ROUNDS = 64  # a round per call a sample waits for (MultiVerse: 3 per turn); more means a reply that never parses
PROMPT_VERSION = 1  # the judge prompts' version every protocol uses; a new wording is v2, pinned here
ANSWER_PROMPT = "eval_answer"


class EvalFailed(Exception):
    """A call of a protocol failed for this turn: recorded on the judgment as `failure`, never a silent zero."""

    def __init__(self, failure: str, detail: str, raw: str | None = None):
        super().__init__(detail)
        self.failure, self.detail, self.raw = failure, detail, raw


def call_failure(error: Exception) -> str:
    return {ModelOutputInvalid: "unreadable_reply", ModelRequestRejected: "request_rejected",
            ModelReplyTooLarge: "reply_too_large"}[type(error)]


@dataclass(frozen=True)
class JudgeReply:
    """What a judge call gave: its raw reply, what the parser read, and the request's text (what the judge was
    shown, kept so a person can be shown the same: `curate eval review`)."""

    raw: str
    parsed: object
    shown: str

    def record(self, **more: object) -> dict:
        return {"raw": self.raw, "read": self.parsed, "shown": self.shown, **more}


@dataclass
class Asker:
    """The calls a protocol makes for one sample: the model under test answers, the judge judges. Each call is
    seeded by the sample id and a key naming the call, so a rerun sends the same request (and hits the cache)."""

    candidate: object
    judge: object
    images: tuple[ImageRef, ...]
    sample_id: str
    baseline: object | None = None

    def seed(self, key: str) -> int:
        return int(hashlib.sha256(f"{self.sample_id}\0{key}".encode()).hexdigest()[:8], 16)

    def answer(self, question: str, history: list[ChatTurn], key: str, who: str = "model") -> str:
        """The answer of the model under test (or of the baseline model, `who="baseline"`) to `question` after
        `history`, the image sent with the first user turn; EvalFailed when no usable answer came back."""
        backend = self.baseline if who == "baseline" else self.candidate
        try:
            return backend.complete(ModelRequest(
                prompt=load_prompt(ANSWER_PROMPT, PROMPT_VERSION), variables={"question": question},
                images=self.images, seed=self.seed(f"{who}\0{key}"), history=tuple(history))).value.text
        except CALL_FAILURES as error:
            raise EvalFailed(f"{who}_{call_failure(error)}", str(error), getattr(error, "raw", None)) from error

    def judge_call(self, prompt_id: str, variables: dict[str, str], parse: Callable[[str], object], key: str,
                   with_image: bool = True) -> JudgeReply:
        """The judge's reply to one prompt, read by `parse` (a reply it cannot read is asked for once more);
        EvalFailed when the judge failed twice."""
        prompt = load_prompt(prompt_id, PROMPT_VERSION)
        try:
            result = self.judge.complete(ModelRequest(
                prompt=prompt, variables=variables, images=self.images if with_image else (),
                seed=self.seed(f"{prompt_id}\0{key}"), parse=parse))
            return JudgeReply(result.raw or "", result.parsed, prompt.render(variables).user)
        except CALL_FAILURES as error:
            raise EvalFailed(f"judge_{call_failure(error)}", str(error), getattr(error, "raw", None)) from error


def scored_by_sample(judgments: list[Judgment]) -> tuple[dict[str, list[Judgment]], list[Judgment]]:
    """The judgments that have scores, by sample and all in order (a failure counts in no mean: it is counted
    apart)."""
    found: dict[str, list[Judgment]] = {}
    for judgment in judgments:
        if not judgment.failure:
            found.setdefault(judgment.sample_id, []).append(judgment)
    return found, [judgment for group in found.values() for judgment in group]


def failed(judgment: Judgment, error: EvalFailed) -> Judgment:
    judgment.failure, judgment.detail = error.failure, error.detail
    if error.raw is not None:
        judgment.judge["failed"] = {"raw": error.raw, "read": None}
    return judgment


@dataclass
class Aggregate:
    score: float | None
    sub_scores: dict = field(default_factory=dict)
    interval: Interval | None = None


class EvalProtocol(Protocol):
    name: str
    score_name: str
    prompts: tuple[str, ...]  # the judge prompts it uses (the answer prompt is every protocol's)

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        """{history, grading, baseline} as the results file states them; UserError for options that do not apply."""
        ...

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        ...

    def aggregate(self, judgments: list[Judgment]) -> Aggregate:
        ...


def refuse_options(options: EvalOptions, protocol: str, allowed: set[str]) -> None:
    """A flag that only another recipe's protocol reads is an error here, not silently ignored."""
    flags = {"history": "--history", "grading": "--grading", "baseline": "--baseline-model"}
    for name, flag in flags.items():
        if name not in allowed and getattr(options, name) is not None:
            raise UserError(f"{flag} does not apply to a {protocol} release (it applies to: "
                            f"{', '.join(sorted(owner for owner, names in FLAG_OWNERS.items() if name in names))})")


FLAG_OWNERS = {"multiverse": {"history"}, "convbench": {"grading"}, "probench": {"baseline"}, "alignmmbench": set()}


def protocols() -> dict[str, EvalProtocol]:
    from benchcurate.curation.evaluation.alignmmbench import ALIGNMMBENCH
    from benchcurate.curation.evaluation.convbench import CONVBENCH
    from benchcurate.curation.evaluation.multiverse import MULTIVERSE
    from benchcurate.curation.evaluation.probench import PROBENCH
    return {"multiverse": MULTIVERSE, "convbench": CONVBENCH, "probench": PROBENCH, "alignmmbench": ALIGNMMBENCH}


def folder_name(model: str) -> str:
    """A model name as one path component (`org/model:tag` -> `org_model_tag`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"


def backend_for(endpoint: Endpoint, options: EvalOptions, cache: Cache, budget: Budget):
    from benchcurate.curation.models.openai_backend import OpenAIBackend

    spec = BackendSpec(kind="openai", model=endpoint.model, base_url=endpoint.base_url,
                       concurrency=options.concurrency, max_output_tokens=options.max_output_tokens,
                       max_cost_usd=options.max_cost_usd,
                       refresh_token=datetime.now(UTC).isoformat() if options.refresh_cache else None)
    return OpenAIBackend(spec, cache=cache, budget=budget)


def protocol_for(release: Release) -> EvalProtocol:
    found = protocols().get(release.recipe)
    if found is None:
        raise UserError(f"release {release.name} was made by recipe '{release.recipe}', which has no evaluation "
                        f"protocol (available: {', '.join(protocols())})")
    return found


def evaluate(options: EvalOptions, on_sample: Callable[[], None] = lambda: None) -> Path:
    """Evaluate, write the results folder and the leaderboard; returns the results folder."""
    release = open_release(Path(options.release))
    protocol = protocol_for(release)
    stated = protocol.settings(options)
    out_root = Path(options.out).expanduser().resolve()
    cache = Cache(out_root / "cache" / "replies.sqlite")
    budget = Budget(options.max_cost_usd)
    endpoints = {"candidate": options.candidate, "judge": options.judge,
                 **({"baseline": options.baseline} if options.baseline else {})}
    backends = {role: backend_for(endpoint, options, cache, budget) for role, endpoint in endpoints.items()}
    for backend in backends.values():
        backend.check()
    images = out_root / "cache" / "images"

    def one(batch: list[dict]) -> tuple[list[Judgment], dict[str, ModelUsage]]:
        (row,) = batch
        with collecting() as usage:
            ask = Asker(backends["candidate"], backends["judge"], (image_file(row["image"], images),), row["index"],
                        backends.get("baseline"))
            try:
                found = protocol.judge_sample(row, ask, options)
            except DeferredToBatch:  # collecting a batch round: the sample goes on in the next round
                found = []
        return found, dict(usage)

    def each_sample() -> Iterator[tuple[list[Judgment], dict[str, ModelUsage]]]:
        window = 4 * options.concurrency  # samples in flight: enough that every request slot stays busy
        yield from ordered_map(one, chunked(rows(release, options.split, options.limit), 1), "threads", window,
                               window)

    batch_usage = fill_by_batch(each_sample, backends, options, out_root / "batches" / release.name /
                                release.version / folder_name(options.candidate.model)) if options.batch else {}
    judgments: list[Judgment] = []
    usage: dict[str, ModelUsage] = batch_usage
    samples = 0
    for found, spent in each_sample():
        judgments += found
        usage = add_usage(usage, spent)
        samples += 1
        on_sample()
    if not samples:
        raise UserError(f"release {release.name} {release.version} has no rows in split '{options.split}'")
    return write_results(release, protocol, options, stated, judgments, usage, samples, out_root)


def fill_by_batch(each_sample: Callable[[], Iterator], backends: dict, options: EvalOptions, folder: Path
                  ) -> dict[str, ModelUsage]:
    """Fill the reply cache through the Batch API, a round at a time: each round runs every sample with requests
    deferred (a sample goes as far as its cached replies take it), submits what they asked for, and polls; a turn
    waits for its answer, so a MultiVerse turn takes three rounds. Raises StageWaiting when a round is not back
    within `batch_wait_seconds` (the ids are recorded: the same command polls them instead of submitting again)."""
    from benchcurate.curation.models.batch import BatchJobs

    usage: dict[str, ModelUsage] = {}
    jobs = {role: BatchJobs(backend, folder / role, wait_seconds=options.batch_wait_seconds,
                            poll_seconds=options.batch_poll_seconds) for role, backend in backends.items()}
    asked_before: set[str] = set()
    for _ in range(MAX_BATCH_ROUNDS):
        with contextlib.ExitStack() as stack:
            deferred = {role: stack.enter_context(backend.deferring()) for role, backend in backends.items()}
            for _ in each_sample():  # a sample stopped at a deferred call; the final pass redoes it from the cache
                pass
        wanted = {role: list(found.values()) for role, found in deferred.items() if found}
        keys = {request.key for requests in wanted.values() for request in requests}
        if not wanted or keys == asked_before:  # nothing new (left: replies that never parse, asked directly)
            break
        asked_before = keys
        for role, requests in wanted.items():
            usage = add_usage(usage, jobs[role].run(requests, {"eval": folder.parent.name, "role": role}))
    return usage


def write_results(release: Release, protocol: EvalProtocol, options: EvalOptions, stated: dict[str, str | None],
                  judgments: list[Judgment], usage: dict[str, ModelUsage], samples: int, out_root: Path) -> Path:
    folder = out_root / release.name / release.version / folder_name(options.candidate.model)
    folder.mkdir(parents=True, exist_ok=True)
    aggregate = protocol.aggregate(judgments)
    failures: dict[str, int] = {}
    for judgment in judgments:
        if judgment.failure:
            failures[judgment.failure] = failures.get(judgment.failure, 0) + 1
    costs = [spent.cost_usd for spent in usage.values() if spent.calls]
    results = EvalResults(
        release=release.name, version=release.version, recipe=release.recipe, protocol=protocol.name,
        model=options.candidate.model, judge_model=options.judge.model, **stated, score=aggregate.score,
        score_name=protocol.score_name, interval=aggregate.interval, sub_scores=aggregate.sub_scores,
        samples=samples, turns_judged=sum(1 for judgment in judgments if not judgment.failure), failures=failures,
        usage=usage, cost_usd=None if any(cost is None for cost in costs) else round(sum(costs), 6),
        prompts={f"{prompt_id}@{PROMPT_VERSION}": load_prompt(prompt_id, PROMPT_VERSION).sha256
                 for prompt_id in (ANSWER_PROMPT, *protocol.prompts)},
        release_checksums_sha256=release.checksums_sha256, release_folder=str(release.folder),
        created_at=datetime.now(UTC))
    partial = folder / "judgments.jsonl.partial"
    partial.write_text("".join(judgment.model_dump_json() + "\n" for judgment in judgments), encoding="utf-8")
    partial.replace(folder / "judgments.jsonl")
    write_json_atomic(folder / "results.json", results.model_dump(mode="json"))
    write_leaderboard(folder.parent)
    return folder


def read_results(folder: Path) -> EvalResults:
    path = folder / "results.json"
    if not path.is_file():
        raise UserError(f"{folder} holds no results.json; give a folder `curate eval` wrote "
                        f"(<out>/<release>/<version>/<model>)")
    return EvalResults.model_validate_json(path.read_text(encoding="utf-8"))


def read_judgments(folder: Path) -> Iterator[Judgment]:
    with open(folder / "judgments.jsonl", encoding="utf-8") as handle:
        for line in handle:
            yield Judgment.model_validate_json(line)


def all_results(version_folder: Path) -> Iterator[EvalResults]:
    for path in sorted(version_folder.glob("*/results.json")):
        yield EvalResults.model_validate_json(path.read_text(encoding="utf-8"))


def write_leaderboard(version_folder: Path) -> Path:
    """Every model evaluated on this release version, best first."""
    found = sorted(all_results(version_folder), key=lambda r: (r.score is None, -(r.score or 0.0)))
    first = found[0]
    lines = [(f"# {first.release} {first.version}: leaderboard ({first.protocol} protocol, score = "
             f"{first.score_name})"), "",
             "| # | model | score | 95% interval | judge | history | samples | turns judged | failures | cost (USD) |",
             "|---:|---|---:|---|---|---|---:|---:|---:|---:|"]
    for rank, result in enumerate(found, 1):
        interval = f"{result.interval.low:.2f} - {result.interval.high:.2f}" if result.interval else "-"
        score = "-" if result.score is None else f"{result.score:.2f}"
        cost = "unknown" if result.cost_usd is None else f"{result.cost_usd:.4f}"
        lines.append(f"| {rank} | {result.model} | {score} | {interval} | {result.judge_model} | {result.history} | "
                     f"{result.samples} | {result.turns_judged} | {sum(result.failures.values())} | {cost} |")
    path = version_folder / LEADERBOARD
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def results_text(folder: Path) -> str:
    result = read_results(folder)
    lines = [f"{result.protocol} protocol on {result.release} {result.version}: {result.model} judged by "
             f"{result.judge_model} (history: {result.history}"
             + (f"; grading: {result.grading}" if result.grading else "")
             + (f"; against: {result.baseline}" if result.baseline else "") + ")",
             f"{result.score_name}: {'-' if result.score is None else f'{result.score:.2f}'}"
             + (f" (95% interval {result.interval.low:.2f} - {result.interval.high:.2f})" if result.interval else "")]
    for name, value in result.sub_scores.items():
        lines.append(f"  {name}: {_short(value)}")
    lines.append(f"samples {result.samples}, turns judged {result.turns_judged}"
                 + (f", failures {result.failures}" if result.failures else ""))
    return "\n".join(lines)


def _short(value: object) -> str:
    import json
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."
