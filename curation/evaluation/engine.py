"""`curate eval`: score a model on a release the way the release's paper scored models.

The model under test and the judge are OpenAI-protocol backends of the model layer (reply cache, retries, costs,
--max-cost, --price), sharing one reply cache under `<out>/cache/`: every reply is stored as it arrives, so an eval
that is interrupted and run again with the same arguments pays for no call twice. Samples are evaluated side by
side on threads (a sample's turns in order: a turn may need the model's earlier answers). Instead of a model server,
`--predictions` gives the answers a harness produced (lmms-eval, VLMEvalKit: `predictions.py`); the judge still
judges them here.

The release is verified (every file against SHA256SUMS and the manifest) before anything is asked. A protocol (one
per recipe, `protocols()`) turns one release row into judged turns and the judged turns into the paper's numbers.
Results go to `<out>/<release>/<version>/<model>/<setting>/`, one folder per setting that changes the number (split,
history or grading or baseline, judge, --limit, predictions file), held by one process at a time: `judgments.jsonl`
(one line per judged sample and turn, the judge's raw replies kept), `results.json` (`score`, the paper's
sub-scores, a 95% interval, tokens, cost, prompt hashes, the checksum of the verified release), and
`<out>/<release>/<version>/LEADERBOARD.md`, one table per comparable setting.

Ctrl-C: no request is sent after the signal; replies already on their way are stored for up to DRAIN_SECONDS, then
the command leaves (exit 130), and the same command later reads them from the cache.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.files import replacing
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.core.markdown import table
from benchcurate.curation.core.parallel import ordered_map
from benchcurate.curation.engine.store import chunked, held, write_json_atomic
from benchcurate.curation.evaluation.alignmmbench import ALIGNMMBENCH
from benchcurate.curation.evaluation.convbench import CONVBENCH
from benchcurate.curation.evaluation.multiverse import MULTIVERSE
from benchcurate.curation.evaluation.predictions import load_predictions
from benchcurate.curation.evaluation.probench import PROBENCH
from benchcurate.curation.evaluation.protocol import (
    ANSWER_PROMPT,
    NOT_IN_PREDICTIONS,
    PROMPT_VERSION,
    Asker,
    EvalProtocol,
    folder_name,
)
from benchcurate.curation.models.batch import DeferredToBatch
from benchcurate.curation.models.pricing import Budget, check_budget_settings
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.curation.models.usage import add_usage, collecting
from benchcurate.curation.release.reading import (
    Release,
    image_file,
    open_release,
    rows,
    split_size,
    verified,
)
from benchcurate.schemas import BackendSpec, ModelUsage
from benchcurate.schemas.evaluation import Endpoint, EvalOptions, EvalResults, Judgment

LEADERBOARD = "LEADERBOARD.md"
MAX_BATCH_ROUNDS = (
    64  # a round per call a sample waits for (MultiVerse: 3 per turn); more means a reply that never parses
)
DRAIN_SECONDS = 1.5  # after Ctrl-C, how long replies already on their way may still arrive and be stored


class NothingScored(Exception):
    """Every judged turn failed (or none was asked): the results are written, and the command says why."""

    def __init__(self, folder: Path, reason: str):
        super().__init__(reason)
        self.folder = folder


def protocols() -> dict[str, EvalProtocol]:
    return {"multiverse": MULTIVERSE, "convbench": CONVBENCH, "probench": PROBENCH, "alignmmbench": ALIGNMMBENCH}


def backend_for(endpoint: Endpoint, options: EvalOptions, cache: Cache, budget: Budget):
    from benchcurate.curation.models.openai_backend import OpenAIBackend

    spec = BackendSpec(
        kind="openai",
        model=endpoint.model,
        base_url=endpoint.base_url,
        concurrency=options.concurrency,
        max_output_tokens=options.max_output_tokens,
        max_cost_usd=options.max_cost_usd,
        prices=options.prices,
        refresh_token=datetime.now(UTC).isoformat() if options.refresh_cache else None,
    )
    check_budget_settings(spec)  # --max-cost needs every model's price, before anything is asked
    return OpenAIBackend(spec, cache=cache, budget=budget)


def protocol_for(release: Release) -> EvalProtocol:
    found = protocols().get(release.recipe)
    if found is None:
        raise UserError(
            f"release {release.name} was made by recipe '{release.recipe}', which has no evaluation "
            f"protocol (available: {', '.join(protocols())})"
        )
    return found


def results_folder(
    out_root: Path,
    release: Release,
    protocol: EvalProtocol,
    options: EvalOptions,
    predictions_sha256: str | None = None,
) -> Path:
    """`<out>/<release>/<version>/<model>/<setting folder>`, inside `out_root` whatever the names say."""
    folder = (
        out_root
        / release.name
        / release.version
        / folder_name(options.candidate.model)
        / setting_folder(
            options.split, protocol.setting(options), options.judge.model, options.limit, predictions_sha256
        )
    )
    if not folder.resolve().is_relative_to(out_root):
        raise UserError(f"refusing to write results outside --out {out_root} ({folder})")
    return folder


def setting_folder(split: str, setting: str, judge: str, limit: int | None, predictions_sha256: str | None) -> str:
    """`<split>.<setting>.judge-<judge>[.first-N][.predictions-<hash>]`: one folder for each thing that changes
    the number."""
    parts = [split, setting, f"judge-{folder_name(judge)}"]
    if limit is not None:
        parts.append(f"first-{limit}")
    if predictions_sha256:
        parts.append(f"predictions-{predictions_sha256[:12]}")
    return folder_name(".".join(parts))


def evaluate(options: EvalOptions, on_sample: Callable[[], None] = lambda: None) -> Path:
    """Evaluate, write the results folder and the leaderboard; returns the results folder. NothingScored (after
    writing) when no turn could be scored."""

    release = open_release(Path(options.release))
    protocol = protocol_for(release)
    stated = protocol.settings(options)
    out_root = Path(options.out).expanduser().resolve()
    answers_file = Path(options.predictions).expanduser().resolve() if options.predictions else None
    if answers_file is not None and not answers_file.is_file():
        raise UserError(f"--predictions {answers_file}: no such file")
    folder = results_folder(out_root, release, protocol, options, answers_file and sha256_file(answers_file))
    with held(
        folder / ".lock",
        lambda holder: (
            f"another curate eval is writing {folder} ({holder}); wait for it "
            f"to end (a second one would pay for the same calls)"
        ),
    ):
        release = verified(release)
        predictions = load_predictions(answers_file, release, options, protocol) if answers_file else None
        rows_in_split = split_size(release, options.split)
        cache = Cache(out_root / "cache" / "replies.sqlite")
        budget = Budget(options.max_cost_usd)
        endpoints = {
            **({} if predictions else {"candidate": options.candidate}),
            "judge": options.judge,
            **({"baseline": options.baseline} if options.baseline else {}),
        }
        backends = {role: backend_for(endpoint, options, cache, budget) for role, endpoint in endpoints.items()}
        for backend in backends.values():
            backend.check()
        judgments, usage, samples = score_samples(
            release,
            protocol,
            options,
            backends,
            predictions,
            out_root / "cache" / "images",
            out_root / "batches" / folder.relative_to(out_root),
            on_sample,
        )
        if not samples:
            raise UserError(f"release {release.name} {release.version} has no rows in split '{options.split}'")
        results = write_results(
            release, protocol, options, stated, judgments, usage, samples, folder, rows_in_split, predictions
        )
    if not results.turns_judged:
        raise NothingScored(folder, nothing_scored(results))
    return folder


def nothing_scored(results: EvalResults) -> str:
    failed = ", ".join(f"{name} {count}" for name, count in sorted(results.failures.items(), key=lambda x: -x[1]))
    return (
        f"nothing could be scored: every judged turn failed ({failed or 'no turn was asked'}); the raw replies "
        f"and reasons are in judgments.jsonl"
    )


def score_samples(
    release: Release,
    protocol: EvalProtocol,
    options: EvalOptions,
    backends: dict,
    predictions,
    images: Path,
    batches: Path,
    on_sample: Callable[[], None],
) -> tuple[list[Judgment], dict[str, ModelUsage], int]:
    """Every sample of the split judged (samples side by side on threads, 4 x concurrency in flight; with --batch,
    the reply cache filled through the Batch API first, its records under `batches`); the judgments in sample
    order, the usage, the number of samples."""

    def one(batch: list[dict]) -> tuple[list[Judgment], dict[str, ModelUsage]]:
        (row,) = batch
        with collecting() as usage:
            ask = Asker(
                backends.get("candidate"),
                backends["judge"],
                (image_file(row["image"], images),),
                row["index"],
                backends.get("baseline"),
                predictions,
            )
            try:
                found = protocol.judge_sample(row, ask, options)
            except DeferredToBatch:  # collecting a batch round: the sample goes on in the next round
                found = []
        return found, dict(usage)

    def each_sample() -> Iterator[tuple[list[Judgment], dict[str, ModelUsage]]]:
        window = 4 * options.concurrency  # samples in flight: enough that every request slot stays busy
        yield from ordered_map(one, chunked(rows(release, options.split, options.limit), 1), "threads", window, window)

    batch_usage = fill_by_batch(each_sample, backends, options, batches) if options.batch else {}
    judgments: list[Judgment] = []
    usage: dict[str, ModelUsage] = batch_usage
    samples = 0
    with stopping_on_interrupt(list(backends.values())):
        for found, spent in each_sample():
            judgments += found
            usage = add_usage(usage, spent)
            samples += 1
            on_sample()
    return judgments, usage, samples


@contextlib.contextmanager
def stopping_on_interrupt(backends: list) -> Iterator[None]:
    """Ctrl-C while scoring: the backends send nothing more from the signal on, the replies in flight get up to
    DRAIN_SECONDS to arrive and be stored, then KeyboardInterrupt goes on up (the command exits 130)."""
    signalled: list[float] = []

    def halt() -> None:
        if not signalled:
            signalled.append(time.monotonic())
            for backend in backends:
                backend.stop_sending()

    def on_signal(*_: object) -> None:
        halt()
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_signal) if main else None
    try:
        yield
    except KeyboardInterrupt:
        halt()  # also when raised another way (an in-process caller)
        raise
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
        if signalled:
            for backend in backends:
                backend.wait_idle(signalled[0] + DRAIN_SECONDS)


def fill_by_batch(
    each_sample: Callable[[], Iterator], backends: dict, options: EvalOptions, folder: Path
) -> dict[str, ModelUsage]:
    """Fill the reply cache through the Batch API, a round at a time: each round runs every sample with requests
    deferred (a sample goes as far as its cached replies take it), submits what they asked for, and polls; a turn
    waits for its answer, so a MultiVerse turn takes three rounds. Raises StageWaiting when a round is not back
    within `batch_wait_seconds` (the ids are recorded: the same command polls them instead of submitting again)."""
    from benchcurate.curation.models.batch import BatchJobs

    usage: dict[str, ModelUsage] = {}
    jobs = {
        role: BatchJobs(
            backend, folder / role, wait_seconds=options.batch_wait_seconds, poll_seconds=options.batch_poll_seconds
        )
        for role, backend in backends.items()
    }
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
            label = "/".join(folder.parts[-4:])[-500:]  # release/version/model/setting, within the API's limit
            usage = add_usage(usage, jobs[role].run(requests, {"eval": label, "role": role}))
    return usage


def write_results(
    release: Release,
    protocol: EvalProtocol,
    options: EvalOptions,
    stated: dict[str, str | None],
    judgments: list[Judgment],
    usage: dict[str, ModelUsage],
    samples: int,
    folder: Path,
    rows_in_split: int | None = None,
    predictions=None,
) -> EvalResults:
    """judgments.jsonl and results.json in `folder`, then the version's leaderboard."""
    unanswered = sum(1 for judgment in judgments if judgment.failure == NOT_IN_PREDICTIONS)
    judgments = [judgment for judgment in judgments if judgment.failure != NOT_IN_PREDICTIONS]
    aggregate = protocol.aggregate(judgments)
    failures: dict[str, int] = {}
    for judgment in judgments:
        if judgment.failure:
            failures[judgment.failure] = failures.get(judgment.failure, 0) + 1
    costs = [spent.cost_usd for spent in usage.values() if spent.calls]
    if predictions is not None:
        stated = {
            **stated,
            "history": f"{stated['history']}; answers from {predictions.record.harness} "
            f"predictions, whose model saw {predictions.record.history}",
        }
    results = EvalResults(
        release=release.name,
        version=release.version,
        recipe=release.recipe,
        protocol=protocol.name,
        model=options.candidate.model,
        judge_model=options.judge.model,
        split=options.split,
        setting=protocol.setting(options),
        limit=options.limit,
        rows_in_split=rows_in_split,
        predictions=predictions.record if predictions is not None else None,
        **stated,
        score=aggregate.score,
        score_name=protocol.score_name,
        interval=aggregate.interval,
        sub_scores=aggregate.sub_scores,
        samples=samples,
        turns_judged=sum(1 for judgment in judgments if not judgment.failure),
        failures=failures,
        unanswered=unanswered,
        warnings=aggregate.warnings,
        usage=usage,
        cost_usd=None if any(cost is None for cost in costs) else round(sum(costs), 6),
        prompts={
            f"{prompt_id}@{PROMPT_VERSION}": load_prompt(prompt_id, PROMPT_VERSION).sha256
            for prompt_id in (ANSWER_PROMPT, *protocol.prompts)
        },
        release_checksums_sha256=release.checksums_sha256,
        release_folder=str(release.folder),
        created_at=datetime.now(UTC),
    )
    with replacing(folder / "judgments.jsonl") as partial:
        partial.write_text("".join(judgment.model_dump_json() + "\n" for judgment in judgments), encoding="utf-8")
    across = across_models(protocol, folder.parents[1], (folder, results, judgments))
    if folder in across:
        results.sub_scores.update(across[folder])
    write_json_atomic(folder / "results.json", results.model_dump(mode="json"))
    write_leaderboard(folder.parents[1])
    return results


def read_results(folder: Path) -> EvalResults:
    path = folder / "results.json"
    if not path.is_file():
        raise UserError(
            f"{folder} holds no results.json; give a folder `curate eval` wrote "
            f"(<out>/<release>/<version>/<model>/<setting>)"
        )
    return EvalResults.model_validate_json(path.read_text(encoding="utf-8"))


def read_judgments(folder: Path) -> Iterator[Judgment]:
    with open(folder / "judgments.jsonl", encoding="utf-8") as handle:
        for line in handle:
            yield Judgment.model_validate_json(line)


def all_results(version_folder: Path) -> Iterator[tuple[Path, EvalResults]]:
    """Every results folder of a release version (`<model>/<setting>/results.json`) and its results."""
    for path in sorted(version_folder.glob("*/*/results.json")):
        yield path.parent, EvalResults.model_validate_json(path.read_text(encoding="utf-8"))


def table_key(result: EvalResults) -> tuple[str, str, str]:
    """What makes two runs comparable: the same split, setting and judge (a --limit or a predictions file does
    not change the setting; such runs are marked in the table)."""
    return result.split, result.setting, result.judge_model


def across_models(
    protocol: EvalProtocol, version_folder: Path, current: tuple[Path, EvalResults, list[Judgment]] | None = None
) -> dict[Path, dict]:
    """Scores that need every run of a comparable setting at once (ProBench's style control), per results folder:
    for the runs comparable with `current` (a run being written: its folder, results and judgments), else for
    every run of the version."""
    fit = getattr(protocol, "across_models", None)
    if fit is None:
        return {}
    runs: dict[tuple, dict[Path, list[Judgment]]] = {}
    for folder, result in all_results(version_folder):
        if current is None or table_key(result) == table_key(current[1]):
            runs.setdefault(table_key(result), {})[folder] = list(read_judgments(folder))
    if current is not None:
        runs.setdefault(table_key(current[1]), {})[current[0]] = current[2]
    return {folder: found for group in runs.values() for folder, found in fit(group).items()}


LEADERBOARD_NOTE = (
    "One table per setting that changes the number. Only complete runs are ranked (every sample of "
    "the split scored, no turn failed); partial runs (--limit, failed turns, settings a harness did "
    "not run) and failed ones follow, unranked."
)
STATUS_NOTE = {"complete": "", "partial": "partial", "failed": "failed: nothing scored"}


def write_leaderboard(version_folder: Path) -> Path:
    """Every run on this release version, one table per comparable setting (split, setting, judge); in each,
    complete runs ranked best first, then partial runs (--limit, failed turns) and failed ones, unranked."""
    found = list(all_results(version_folder))
    first = found[0][1]
    protocol = protocols().get(first.protocol)
    extra = across_models(protocol, version_folder) if protocol is not None else {}
    title = f"# {first.release} {first.version}: leaderboard ({first.protocol} protocol, score = {first.score_name})"
    lines = [title, "", LEADERBOARD_NOTE]
    tables: dict[tuple, list[tuple[Path, EvalResults]]] = {}
    for folder, result in found:
        tables.setdefault(table_key(result), []).append((folder, result))
    for (split, setting, judge), runs in sorted(tables.items()):
        lines += ["", f"## split {split}, {setting}, judged by {judge}", ""]
        lines += leaderboard_table(runs, extra)
    path = version_folder / LEADERBOARD
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def leaderboard_table(runs: list[tuple[Path, EvalResults]], extra: dict[Path, dict]) -> list[str]:
    order = {"complete": 0, "partial": 1, "failed": 2}
    runs = sorted(runs, key=lambda run: (order[run[1].status], -(run[1].score or 0.0), run[1].model))
    styled = any(folder in extra for folder, _ in runs)
    columns = [
        "#",
        "model",
        "score",
        "95% interval",
        *(["style-controlled"] if styled else []),
        "status",
        "samples",
        "turns judged",
        "failures",
        "answers",
        "cost (USD)",
    ]
    rows, notes = [], []
    rank = 0
    for folder, result in runs:
        complete = result.status == "complete"
        rank += complete
        interval = f"{result.interval.low:.2f} - {result.interval.high:.2f}" if result.interval else "-"
        if result.interval and result.interval.low == result.interval.high:
            interval += " (zero width)"
        score = "-" if result.score is None else f"{result.score:.2f}"
        cost = "unknown" if result.cost_usd is None else f"{result.cost_usd:.4f}"
        status = STATUS_NOTE[result.status] or "complete"
        if result.status == "partial" and result.rows_in_split and result.samples < result.rows_in_split:
            status = f"partial: {result.samples} of {result.rows_in_split} samples"
        answers = f"{result.predictions.harness} predictions" if result.predictions else "model server"
        style = []
        if styled:
            rating = extra.get(folder, {}).get("bradley_terry_style_controlled", {})
            style = [f"{rating['value']:.2f}" if rating.get("value") is not None else "not identifiable"]
        rows.append(
            (
                rank if complete else "-",
                result.model,
                score,
                interval,
                *style,
                status,
                result.samples,
                result.turns_judged,
                sum(result.failures.values()),
                answers,
                cost,
            )
        )
        notes += [f"- {result.model}: {warning}" for warning in result.warnings]
    if styled:
        reason = next(
            (
                rating.get("note")
                for found in extra.values()
                if (rating := found.get("bradley_terry_style_controlled", {})).get("value") is None
            ),
            None,
        )
        if reason:
            notes.append(f"- style-controlled: {reason}")
    right = ("#", "score", "style-controlled", "samples", "turns judged", "failures", "cost (USD)")
    return table(rows, columns, right).splitlines() + ([""] + notes if notes else [])


def results_text(folder: Path) -> str:
    result = read_results(folder)
    lines = [
        f"{result.protocol} protocol on {result.release} {result.version}: {result.model} judged by "
        f"{result.judge_model} (history: {result.history}"
        + (f"; grading: {result.grading}" if result.grading else "")
        + (f"; against: {result.baseline}" if result.baseline else "")
        + ")",
        f"{result.score_name}: {'-' if result.score is None else f'{result.score:.2f}'}"
        + (f" (95% interval {result.interval.low:.2f} - {result.interval.high:.2f})" if result.interval else ""),
    ]
    for name, value in result.sub_scores.items():
        lines.append(f"  {name}: {_short(value)}")
    lines.append(
        f"samples {result.samples}"
        + (f" of {result.rows_in_split}" if result.rows_in_split else "")
        + f", turns judged {result.turns_judged}"
        + (f", failures {result.failures}" if result.failures else "")
        + (f", not in the predictions {result.unanswered}" if result.unanswered else "")
        + f" ({result.status})"
    )
    lines += [f"warning: {warning}" for warning in result.warnings]
    return "\n".join(lines)


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."
