"""Conversation review rounds in Label Studio: push a run's samples, pull what people answered.

This module only talks to Label Studio and writes files; what the answers decide is
`curation/review/policy.py`, what the page shows is `annotation/page.py`.

Push (`curate review push RUN`): the samples entering the run's `conversation_review` stage become tasks of one
project per round (`<run id> review round N`), each carrying its sample id, so a re-push adds nothing twice. The
project's overlap (`maximum_annotations`) is `conversation_review.reviewers` with every task in the overlap
cohort, so Label Studio's own queue ("Label All Tasks") hands each task to that many distinct people and a
person never gets a task twice; the queue shows each person only their own annotation. The drafts are one
prediction per task that each reviewer accepts or edits. Images are copied into the local server's files
folder and served by a LocalFiles storage; for a server of your own (LABEL_STUDIO_URL) small images are embedded
instead. Tasks go in batches of 500.

Phase 2 (`curate review push RUN --phase 2 [--all]`): the samples whose ties or differing edits wait for an
adjudicator (or, with --all, every sample the reviewers settled) go to a second project, one person each, that
shows every reviewer's answer beside their name and pre-selects nothing.

Pull (`curate review pull RUN`): every annotation of both projects, as fetched, into `review/annotations.jsonl`;
each checked against what its sample holds (an invalid one, one changed by another person than its author, or a
copy of another's, is listed with the reason and not counted); then the policy, and its record
(`review/record.json`, `schemas.review.ReviewRecord`), which the `conversation_review` stage applies.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchcurate.annotation.page import PHASE2_CONFIG, phase1_config, phase1_task, phase2_task, sections_for
from benchcurate.curation.core.errors import BackendUnavailable, UserError
from benchcurate.curation.core.extras import require
from benchcurate.curation.core.files import replacing
from benchcurate.curation.engine.store import RunStore, write_json_atomic
from benchcurate.curation.review.conversation_review import RECORD, read_record
from benchcurate.curation.review.fields import ReviewFields, review_fields
from benchcurate.curation.review.policy import RoundInput, Settled, Submitted, decide_round
from benchcurate.schemas import Sample
from benchcurate.schemas.review import Adjudication, RejectedAnnotation, ReviewerAnswers, ReviewRecord

BATCH = 500
EMBED_MAX_BYTES = 300_000
REVIEW_DIR = "review"
ADJUDICATOR = "adjudicator"


def reviewer_id(user_id: object) -> str:
    return f"label-studio-user-{user_id}"


@dataclass
class Connection:
    url: str
    token: str
    files_root: Path | None  # the local server's files folder; None for a server of the user's own

    def client(self):
        from label_studio_sdk import LabelStudio

        return LabelStudio(base_url=self.url, api_key=self.token, timeout=120)


def _detail(body: object) -> str:
    """Label Studio's own reason from an error body, short (never the request, so no token)."""
    if isinstance(body, dict):
        body = body.get("detail") or body.get("message") or body.get("validation_errors") or ""
    return " ".join(str(body or "").split())[:160]


@contextmanager
def talking_to(connection: Connection, what: str) -> Iterator[None]:
    """Label Studio down or failing (no answer, HTTP 5xx) is one BackendUnavailable line with what to do; a
    refused token or a missing project is a UserError; what was recorded before stays recorded."""
    import httpx
    from label_studio_sdk.core.api_error import ApiError

    try:
        yield
    except httpx.TransportError as error:
        raise BackendUnavailable(
            f"Label Studio at {connection.url} stopped answering during {what} "
            f"({type(error).__name__}); nothing half-done was applied: rerun the same command "
            f"when it is back (`curate ls status`)"
        ) from error
    except (ApiError, httpx.HTTPStatusError) as error:
        status = error.status_code if isinstance(error, ApiError) else error.response.status_code
        body = error.body if isinstance(error, ApiError) else _json_or_text(error.response)
        reason = f" ({_detail(body)})" if _detail(body) else ""
        if status == 401:
            raise UserError(
                f"Label Studio at {connection.url} rejected the API token (HTTP 401); check LABEL_STUDIO_API_KEY"
            ) from error
        if status == 404:
            raise UserError(
                f"Label Studio at {connection.url} has no such object during {what} (HTTP 404"
                f"{reason}); was the project deleted? Remove review/state.json to push a new "
                f"round"
            ) from error
        if status >= 500 or status in (408, 429):
            raise BackendUnavailable(
                f"Label Studio at {connection.url} failed during {what} (HTTP {status}"
                f"{reason}); nothing half-done was applied: look at its log (`curate ls "
                f"status` names it), then rerun the same command"
            ) from error
        raise UserError(f"Label Studio at {connection.url} refused {what} (HTTP {status}{reason})") from error


def _json_or_text(response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text


def connect(ls_data: Path) -> Connection:
    """LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY, else the server `curate ls up` runs for `ls_data`."""
    require("review", "review in Label Studio")
    url, token = os.environ.get("LABEL_STUDIO_URL"), os.environ.get("LABEL_STUDIO_API_KEY")
    if url:
        if not token:
            raise UserError("LABEL_STUDIO_URL is set but LABEL_STUDIO_API_KEY is not; set the server's API token")
        return Connection(url.rstrip("/"), token, None)
    from benchcurate.annotation.server import admin_token, status

    info = status(ls_data.resolve())
    if not info.healthy:
        raise BackendUnavailable(
            f"no Label Studio answering for {ls_data}; start one with `curate ls up` (or set "
            f"LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY)"
        )
    return Connection(info.url, token or admin_token(info.data_dir)[0], info.data_dir / "files")


# --- the round's state ---------------------------------------------------------------------------------------


@dataclass
class RoundState:
    project_id: int | None = None
    title: str = ""
    round: int = 1
    pushed: dict[str, int] = field(default_factory=dict)  # sample id -> task id
    phase2_project_id: int | None = None  # adjudication of open questions by others
    phase2_pushed: dict[str, int] = field(default_factory=dict)


def _state_path(run_dir: Path) -> Path:
    return run_dir / REVIEW_DIR / "state.json"


def load_state(run_dir: Path) -> RoundState:
    path = _state_path(run_dir)
    return RoundState(**json.loads(path.read_text(encoding="utf-8"))) if path.exists() else RoundState()


def _save_state(run_dir: Path, state: RoundState) -> None:
    _state_path(run_dir).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(_state_path(run_dir), asdict(state))


def review_stage(run_dir: Path) -> tuple[int, dict]:
    """(index, config) of the run's conversation_review stage."""
    recipe = RunStore(run_dir).load_config().recipe
    names = [spec.stage for spec in recipe.stages]
    if "conversation_review" not in names:
        raise UserError(f"recipe {recipe.name} has no conversation_review stage")
    index = names.index("conversation_review")
    return index, recipe.stages[index].config


def reviewers_required(run_dir: Path) -> int:
    return int(review_stage(run_dir)[1].get("reviewers", 2))


def review_input(run_dir: Path) -> list[Sample]:
    """The samples entering the run's conversation_review stage (its previous stage must be done)."""
    store = RunStore(run_dir)
    index, _ = review_stage(run_dir)
    if store.done_output(index - 1) is None:
        stages = len(store.load_config().recipe.stages)
        raise UserError(
            f"run {run_dir.name} has not reached review yet (stage {index} of {stages}); finish "
            f"the earlier stages with `curate run ... --run-id {run_dir.name}`"
        )
    return list(store.kept(index - 1))


# --- push ----------------------------------------------------------------------------------------------------


def image_url(path: Path, sha256: str, image_format: str | None, connection: Connection, folder: str) -> str:
    """The image as Label Studio shows it: copied into the local server's files folder under `folder` (served by
    the project's LocalFiles storage), or embedded when small for a server of the user's own."""
    if connection.files_root is not None:
        target = connection.files_root / folder / f"{sha256}{path.suffix.lower() or '.img'}"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        return f"/data/local-files/?d={folder}/{target.name}"
    data = path.read_bytes()
    if len(data) > EMBED_MAX_BYTES:
        raise UserError(
            f"image {path} is {len(data)} bytes; with a server of your own, serve images from its "
            f"local-files root or cloud storage (embedding is limited to {EMBED_MAX_BYTES} bytes)"
        )
    kind = (image_format or "png").lower()
    return f"data:image/{kind};base64,{base64.b64encode(data).decode()}"


def _sample_image(sample: Sample, connection: Connection, run_id: str) -> str:
    image = sample.images[0]
    return image_url(Path(image.path), image.sha256, image.format, connection, run_id)


@dataclass
class PushResult:
    url: str
    pushed: int
    already: int


def push(run_dir: Path, connection: Connection, phase: int = 1, everything: bool = False) -> PushResult:
    """Phase 1: every sample entering review. Phase 2: the samples with open questions after the last pull, or
    every sample the reviewers settled when `everything`."""
    with talking_to(connection, "the push"):
        return _push(run_dir, connection, phase, everything)


def _project_settings(phase: int, reviewers: int) -> dict:
    """Overlap through Label Studio's queue: each task to `reviewers` distinct people (one adjudicator in phase
    2); drafts shown as predictions in phase 1 only; no skipping and no empty submits (a skip would use up a
    place of the overlap)."""
    return {
        "maximum_annotations": reviewers if phase == 1 else 1,
        "overlap_cohort_percentage": 100,
        "show_overlap_first": False,
        "sampling": "Sequential sampling",
        "show_collab_predictions": phase == 1,
        "reveal_preannotations_interactively": False,
        "show_skip_button": False,
        "enable_empty_annotation": False,
        "show_instruction": False,
    }


def _push(run_dir: Path, connection: Connection, phase: int, everything: bool) -> PushResult:
    samples = review_input(run_dir)
    client = connection.client()
    state = load_state(run_dir)
    run_id = run_dir.name
    reviewers = reviewers_required(run_dir)
    open_questions: dict[str, list[dict]] = {}
    if phase == 2:
        record = read_record(run_dir)
        if state.project_id is None or record is None:
            raise UserError(f"phase 2 adjudicates phase 1: push and pull run {run_id} first")
        open_questions = questions_to_settle(record, {s.id: review_fields(s) for s in samples}, everything)
        samples = [sample for sample in samples if sample.id in open_questions]
    project_field, pushed = ("project_id", state.pushed) if phase == 1 else ("phase2_project_id", state.phase2_pushed)
    settings = _project_settings(phase, reviewers)
    if getattr(state, project_field) is None:
        title = f"{run_id} review round {state.round}" + (" phase 2" if phase == 2 else "")
        config = phase1_config(sections_for(samples)) if phase == 1 else PHASE2_CONFIG
        project = client.projects.create(title=title, label_config=config, **settings)
        setattr(state, project_field, project.id)
        state.title = state.title or title
        if connection.files_root is not None:
            (connection.files_root / run_id).mkdir(parents=True, exist_ok=True)
            client.import_storage.local.create(
                project=project.id, path=str(connection.files_root / run_id), title="images", use_blob_urls=True
            )
        _save_state(run_dir, state)
    project_id = getattr(state, project_field)
    if client.projects.get(project_id).maximum_annotations != settings["maximum_annotations"]:
        client.projects.update(project_id, maximum_annotations=settings["maximum_annotations"])
    existing = {task.data.get("sample_id"): task.id for task in client.tasks.list(project=project_id)}
    pushed.update({sample_id: task_id for sample_id, task_id in existing.items() if sample_id})
    new = [sample for sample in samples if sample.id not in pushed]
    names = people(client)[0] if phase == 2 else {}
    order = {sample.id: number for number, sample in enumerate(samples, 1)}

    def saved(batch: list[Sample], task_ids: list[int]) -> None:
        pushed.update({sample.id: task_id for sample, task_id in zip(batch, task_ids)})
        _save_state(run_dir, state)

    def to_task(sample: Sample) -> dict:
        image = _sample_image(sample, connection, run_id)
        if phase == 1:
            return phase1_task(sample, image, order[sample.id], len(samples), f"{run_id} drafts")
        return phase2_task(sample, image, open_questions[sample.id], names, order[sample.id], len(samples))

    import_in_batches(client, project_id, new, to_task, saved)
    return PushResult(url=f"{connection.url}/projects/{project_id}", pushed=len(new), already=len(samples) - len(new))


def questions_to_settle(
    record: ReviewRecord, fields: dict[str, ReviewFields], everything: bool
) -> dict[str, list[dict]]:
    """Per sample, what phase 2 asks: its open questions and differing texts, or (`everything`) every judgement
    of a sample the reviewers settled, each with who answered what."""
    found: dict[str, list[dict]] = {}
    for sample_id, outcome in record.samples.items():
        if sample_id not in fields or len(outcome.answers) < record.reviewers_required:
            continue  # gone from the run, or still short of reviewers
        keys = (
            [key for key in outcome.questions if not key.startswith("check_")]
            if everything and outcome.status != "pending"
            else outcome.open_keys()
        )
        entries = []
        for key in keys:
            if key in outcome.questions:
                question = fields[sample_id].question(key)
                entries.append(
                    {
                        "key": key,
                        "kind": "question",
                        "label": question.label if question else key,
                        "answers": outcome.questions[key].answers,
                    }
                )
            else:
                text = outcome.texts[key]
                field_ = fields[sample_id].text(key)
                entries.append(
                    {
                        "key": key,
                        "kind": "text",
                        "label": field_.label if field_ else key,
                        "answers": text.versions,
                        "draft": text.draft,
                    }
                )
        if entries:
            found[sample_id] = entries
    return found


def import_in_batches(
    client, project_id: int, items: list, to_task, done, batch_size: int = BATCH, attempts: int = 3
) -> None:
    """Import tasks `batch_size` at a time (well inside the 250K-task / 200 MB limit of one request); a batch
    that times out is retried; `done(batch, task_ids)` records each batch as soon as it is in."""
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        for attempt in range(attempts):
            try:
                reply = client.projects.import_tasks(
                    project_id, return_task_ids=True, request=[to_task(item) for item in batch]
                )
                break
            except Exception as error:  # httpx timeouts and server errors surface as several types
                if attempt == attempts - 1 or "timeout" not in type(error).__name__.lower() + str(error).lower():
                    raise
        done(batch, list(reply.task_ids or []))


# --- pull ----------------------------------------------------------------------------------------------------


def people(client) -> tuple[dict[str, str], frozenset[str] | None]:
    """(reviewer id -> email, the adjudicators or None when nobody has that role), from Label Studio's users
    (`curate ls user add` keeps the role in the user's last name)."""
    users = list(client.users.list())
    adjudicators = frozenset(reviewer_id(user.id) for user in users if (user.last_name or "") == ADJUDICATOR)
    return {reviewer_id(user.id): user.email for user in users}, adjudicators or None


def fetch_annotations(client, project_id: int, phase: int) -> list[dict]:
    """Every annotation of the project as Label Studio holds it, with its task's sample id and phase-2 mapping."""
    rows = []
    for task in client.tasks.list(project=project_id, fields="all"):
        for annotation in task.annotations or []:
            rows.append(
                {
                    "phase": phase,
                    "task_id": task.id,
                    "sample_id": task.data.get("sample_id"),
                    "settle": task.data.get("settle") if phase == 2 else None,
                    **{
                        key: annotation.get(key)
                        for key in (
                            "id",
                            "completed_by",
                            "updated_by",
                            "was_cancelled",
                            "parent_annotation",
                            "result",
                            "created_at",
                            "updated_at",
                        )
                    },
                }
            )
    return sorted(rows, key=lambda row: (row["phase"], row["task_id"], row["id"]))


def _text(value: dict) -> str:
    return "\n".join(str(part) for part in value.get("text") or []).strip()


def parse_answers(
    result: list[dict], fields: ReviewFields, reviewer: str, annotation_id: int
) -> tuple[ReviewerAnswers | None, str]:
    """A phase-1 result as one person's answers, checked against what the sample holds; or the problem."""
    choices: dict[str, str] = {}
    texts: dict[str, str] = {}
    notes = None
    for region in result or []:
        name, value = str(region.get("from_name")), region.get("value") or {}
        question, text_field = fields.question(name), fields.text(name)
        if question is not None:
            chosen = value.get("choices") or []
            answer = {"rewrite": "keep"}.get(chosen[0], chosen[0]) if len(chosen) == 1 else None
            if answer not in question.answers:
                return None, f"{name}: expected one of {'/'.join(question.answers)}, got {chosen}"
            choices[name] = answer
        elif text_field is not None or name in fields.additions:
            texts[name] = _text(value)
        elif name == "notes":
            notes = _text(value) or None
        else:
            return None, f"{name}: no such field in this sample"
    missing = [
        question.key for question in fields.questions if question.default is None and question.key not in choices
    ]
    if missing:
        return None, f"not answered: {', '.join(missing)}"
    return ReviewerAnswers(
        reviewer=reviewer,
        annotation_id=annotation_id,
        choices=choices,
        texts={key: text for key, text in texts.items() if text},
        notes=notes,
    ), ""


def parse_settlement(
    result: list[dict], settle: list[dict], adjudicator: str, annotation_id: int
) -> tuple[list[Adjudication], str]:
    """A phase-2 result as the adjudicator's answers: per open question the chosen option (its answer), or for a
    text the final text typed, which wins over the option."""
    chosen: dict[int, str] = {}
    typed: dict[int, str] = {}
    for region in result or []:
        name, value = str(region.get("from_name")), region.get("value") or {}
        kind, _, index = name.partition("_")
        if kind not in ("settle", "own") or not index.isdigit() or int(index) >= len(settle or []):
            return [], f"{name}: no such question in this task"
        if kind == "settle":
            options = value.get("choices") or []
            if len(options) != 1 or options[0] not in settle[int(index)]["answers"]:
                return [], f"{name}: expected one of the options shown, got {options}"
            chosen[int(index)] = settle[int(index)]["answers"][options[0]]
        elif _text(value):
            typed[int(index)] = _text(value)
    missing = [settle[index]["key"] for index in range(len(settle or [])) if index not in chosen and index not in typed]
    if missing:
        return [], f"not answered: {', '.join(missing)}"
    return [
        Adjudication(
            key=entry["key"],
            adjudicator=adjudicator,
            annotation_id=annotation_id,
            answer=typed.get(index, chosen.get(index, "")),
        )
        for index, entry in enumerate(settle)
    ], ""


def _authorship_problem(row: dict, authors: dict[int, object]) -> str:
    """Why an annotation is not its author's own work: changed by another person, or copied from another's."""
    author, editor = row["completed_by"], row["updated_by"]
    if author is None:
        return "no author"
    if editor is not None and editor != author:
        return (
            f"written or last changed by {reviewer_id(editor)}, not by its author {reviewer_id(author)}; it does "
            f"not count: delete it in Label Studio so the queue hands the task out again"
        )
    parent = row.get("parent_annotation")
    if parent is not None and authors.get(parent) not in (None, author):
        return f"copied from annotation {parent} of {reviewer_id(authors[parent])}; not an independent answer"
    return ""


def parse_round(
    rows: list[dict], fields: dict[str, ReviewFields]
) -> tuple[list[Submitted], list[Settled], list[RejectedAnnotation]]:
    """What each fetched annotation says, or why it does not count (cancelled ones are left out)."""
    authors = {row["id"]: row["completed_by"] for row in rows}
    submitted, settled, rejected = [], [], []
    for row in rows:
        if row["was_cancelled"]:
            continue
        who, sample_id = reviewer_id(row["completed_by"]), row["sample_id"]
        problem = _authorship_problem(row, authors)
        if not problem and sample_id not in fields:
            problem = "its sample is not in the run's review input any more"
        if not problem and row["phase"] == 1:
            answers, problem = parse_answers(row["result"], fields[sample_id], who, row["id"])
            if answers is not None:
                submitted.append(Submitted(sample_id, row["task_id"], answers))
        elif not problem:
            adjudications, problem = parse_settlement(row["result"], row["settle"], who, row["id"])
            if adjudications:
                settled.append(Settled(sample_id, row["task_id"], adjudications))
        if problem:
            rejected.append(
                RejectedAnnotation(
                    sample_id=sample_id,
                    task_id=row["task_id"],
                    annotation_id=row["id"],
                    reviewer=who,
                    phase=row["phase"],
                    problem=problem,
                )
            )
    return submitted, settled, rejected


@dataclass
class PullResult:
    record: ReviewRecord
    annotations: int
    counted: int
    path: Path


def pull(run_dir: Path, connection: Connection) -> PullResult:
    state = load_state(run_dir)
    if state.project_id is None:
        raise UserError(f"run {run_dir.name} has not been pushed for review; run `curate review push {run_dir.name}`")
    with talking_to(connection, "the pull"):
        client = connection.client()
        rows = fetch_annotations(client, state.project_id, 1)
        if state.phase2_project_id is not None:
            rows += fetch_annotations(client, state.phase2_project_id, 2)
        names, adjudicators = people(client)
    involved = {reviewer_id(row["completed_by"]) for row in rows}
    names = {person: email for person, email in names.items() if person in involved}  # nobody else's email
    samples = review_input(run_dir)
    fields = {sample.id: review_fields(sample) for sample in samples if sample.id in state.pushed}
    submitted, settled, rejected = parse_round(rows, fields)
    record = decide_round(
        RoundInput(
            run_id=run_dir.name,
            project=state.title,
            round=state.round,
            required=reviewers_required(run_dir),
            pulled_at=datetime.now(UTC),
            fields=fields,
            submitted=submitted,
            settled=settled,
            adjudicators=adjudicators,
            names=names,
            rejected=rejected,
        )
    )
    return PullResult(record, len(rows), len(submitted) + len(settled), write_pull(run_dir, rows, record))


def write_pull(run_dir: Path, rows: list[dict], record: ReviewRecord) -> Path:
    """The annotations as fetched and the record; a record equal to the last one but for its time is not
    rewritten, so a pull with nothing new changes nothing (and the review stage does not rerun)."""
    folder = run_dir / REVIEW_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with replacing(folder / "annotations.jsonl") as partial:
        partial.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    path = run_dir / RECORD
    try:
        last = read_record(run_dir)
    except UserError:  # a record of an older version: replaced
        last = None
    if last is None or last.model_copy(update={"pulled_at": record.pulled_at}) != record:
        write_json_atomic(path, record.model_dump(mode="json"))
    return path
