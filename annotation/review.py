"""Conversation review rounds in Label Studio: push a run's conversations, pull the judgements back.

Push (`curate review push RUN`): the samples entering the run's `conversation_review` stage become tasks of one
project per round (`<run id> review round N`), each carrying its sample id, so a re-push adds nothing twice.
Images are copied into the local server's files folder and served by a LocalFiles storage; for a server of
your own (LABEL_STUDIO_URL) small images are embedded instead. Tasks go in batches of 500.

Phase 2 (`curate review push RUN --phase 2 [--all]`): the samples phase 1 left tied (or all of them) go to a
second project with every phase-1 judgement shown as a prediction; there the adjudicator's majority decides.

Drafts (ConvBench): a sample's caption, per-turn references and focus points appear as editable boxes filled
with the model's drafts (predictions); the latest reviewer's edit of each is applied. Checklists (MultiVerse):
each item can be kept, deleted or rewritten, and new items added per user turn (`question | main | sub`).

Pull (`curate review pull RUN`): every non-cancelled annotation of the round's project, checked against the
labeling config (all three criteria answered yes or no; an invalid one is reported in `review/rejected.jsonl`
and not used), one per reviewer and task (the latest). Per criterion: percent agreement and Fleiss' kappa
(`review/agreement.json`); per sample the majority decides, a tie leaves it pending for a second phase
(`review/outcomes.json`), which the `conversation_review` stage applies in `human` mode.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchcurate.curation.errors import BackendUnavailable, UserError
from benchcurate.curation.extras import require
from benchcurate.curation.review.agreement import fleiss_kappa, majority, percent_agreement
from benchcurate.curation.store import RunStore, write_json_atomic
from benchcurate.schemas import Sample

CRITERIA = {"natural": ("Is the conversation natural and realistic?", "unnatural"),
            "correct": ("Are the assistant's answers correct?", "incorrect"),
            "needs_image": ("Does answering need the image?", "answerable_without_image")}
BATCH = 500
EMBED_MAX_BYTES = 300_000
REVIEW_DIR = "review"


SECTIONS = ("rewrites", "drafts", "checklists")


def sections_for(samples: list[Sample]) -> tuple[str, ...]:
    """The review kinds a round needs beyond the conversation judgement, from what its samples hold."""
    found = {"rewrites": any(s.rewrites for s in samples),
             "drafts": any(s.caption or any(t.reference or t.focus_points for t in s.conversation) for s in samples),
             "checklists": any(t.checklist for s in samples for t in s.conversation)}
    return tuple(name for name in SECTIONS if found[name])


def labeling_config(sections: tuple[str, ...] = SECTIONS) -> str:
    """Always: the image, the dialogue in bubbles (Paragraphs: the Chat tag is Enterprise-only), three required
    yes/no criteria and notes (MultiVerse). Then per kind in `sections`: keep/reject per paraphrase rewrite
    (AlignMMBench), editable drafts of caption, references and focus points (ConvBench), and keep, delete,
    rewrite or add per checklist item (MultiVerse). Within a kind, a sample without such content shows nothing."""
    choices = "\n".join(
        f'  <Header value="{question}"/>\n'
        f'  <Choices name="{name}" toName="dialogue" choice="single" showInline="true" required="true">'
        f'<Choice value="yes"/><Choice value="no"/></Choices>' for name, (question, _) in CRITERIA.items())
    rewrites = ('  <Repeater on="$rewrites" indexFlag="{{idx}}">\n'
                '    <Text name="rewrite_{{idx}}" value="$rewrites[{{idx}}].label"/>\n'
                '    <Choices name="keep_{{idx}}" toName="rewrite_{{idx}}" choice="single" showInline="true" '
                'required="true"><Choice value="keep"/><Choice value="reject"/></Choices>\n  </Repeater>')
    # ConvBench drafts, pre-filled from predictions and edited in place; lists of zero or one entry so that
    # samples without a caption or focus points show no box
    drafts = ('  <Repeater on="$captions" indexFlag="{{idx}}">\n'
              '    <Header value="Caption (the judge sees only this: it must hold every fact the answers need)"/>\n'
              '    <Text name="caption_for_{{idx}}" value="$captions[{{idx}}].label"/>\n'
              '    <TextArea name="caption_{{idx}}" toName="caption_for_{{idx}}" rows="4" editable="true" '
              'maxSubmissions="1"/>\n  </Repeater>\n'
              '  <Repeater on="$references" indexFlag="{{idx}}">\n'
              '    <Text name="turn_{{idx}}" value="$references[{{idx}}].question"/>\n'
              '    <TextArea name="reference_{{idx}}" toName="turn_{{idx}}" rows="3" editable="true" '
              'maxSubmissions="1"/>\n  </Repeater>\n'
              '  <Repeater on="$focus" indexFlag="{{idx}}">\n'
              '    <Text name="focus_for_{{idx}}" value="$focus[{{idx}}].label"/>\n'
              '    <TextArea name="focus_{{idx}}" toName="focus_for_{{idx}}" rows="4" editable="true" '
              'maxSubmissions="1"/>\n  </Repeater>')
    checklist = ('  <Repeater on="$checklist" indexFlag="{{idx}}">\n'
                 '    <Text name="item_{{idx}}" value="$checklist[{{idx}}].label"/>\n'
                 '    <Choices name="check_{{idx}}" toName="item_{{idx}}" choice="single" showInline="true">'
                 '<Choice value="keep"/><Choice value="delete"/></Choices>\n'
                 '    <TextArea name="checkedit_{{idx}}" toName="item_{{idx}}" rows="1" editable="true" '
                 'maxSubmissions="1" placeholder="Rewrite the question (empty: unchanged)"/>\n  </Repeater>\n'
                 '  <Repeater on="$checklist_turns" indexFlag="{{idx}}">\n'
                 '    <Text name="turn_items_{{idx}}" value="$checklist_turns[{{idx}}].label"/>\n'
                 '    <TextArea name="checkadd_{{idx}}" toName="turn_items_{{idx}}" rows="2" editable="true" '
                 'placeholder="New items, one per line: question | main criterion | sub-criterion"/>\n'
                 '  </Repeater>')
    return (f'<View>\n  <Header value="Sample $sample_id"/>\n  <Image name="image" value="$image" maxWidth="520px"/>\n'
            f'  <Paragraphs name="dialogue" value="$dialogue" layout="dialogue" nameKey="author" textKey="text"/>\n'
            f'{choices}\n  <TextArea name="notes" toName="dialogue" rows="3" editable="true" '
            f'placeholder="What is wrong, if anything"/>\n'
            + "".join(f"{part}\n" for name, part in (("rewrites", rewrites), ("drafts", drafts),
                                                      ("checklists", checklist)) if name in sections)
            + "</View>")


@dataclass
class Connection:
    url: str
    token: str
    files_root: Path | None  # the local server's files folder; None for a server of the user's own

    def client(self):
        from label_studio_sdk import LabelStudio
        return LabelStudio(base_url=self.url, api_key=self.token, timeout=120)


@contextmanager
def talking_to(connection: Connection, what: str):
    """Connection failures become one clear error; what was recorded before them stays recorded."""
    import httpx
    from label_studio_sdk.core.api_error import ApiError
    try:
        yield
    except httpx.TransportError as error:
        raise BackendUnavailable(f"Label Studio at {connection.url} stopped answering during {what} "
                                 f"({type(error).__name__}); nothing half-done was applied: rerun the same command "
                                 f"when it is back") from error
    except ApiError as error:
        if error.status_code == 401:
            raise UserError(f"Label Studio at {connection.url} rejected the API token (HTTP 401); check "
                            f"LABEL_STUDIO_API_KEY") from error
        raise


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
        raise BackendUnavailable(f"no Label Studio answering for {ls_data}; start one with `curate ls up` (or set "
                                 f"LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY)")
    return Connection(info.url, token or admin_token(info.data_dir)[0], info.data_dir / "files")


@dataclass
class RoundState:
    project_id: int | None = None
    title: str = ""
    round: int = 1
    pushed: dict[str, int] = field(default_factory=dict)   # sample id -> task id
    phase2_project_id: int | None = None                    # adjudication of ties (or of everything) by others
    phase2_pushed: dict[str, int] = field(default_factory=dict)


def _state_path(run_dir: Path) -> Path:
    return run_dir / REVIEW_DIR / "state.json"


def load_state(run_dir: Path) -> RoundState:
    path = _state_path(run_dir)
    return RoundState(**json.loads(path.read_text(encoding="utf-8"))) if path.exists() else RoundState()


def review_input(run_dir: Path) -> list[Sample]:
    """The samples entering the run's conversation_review stage (its previous stage must be done)."""
    store = RunStore(run_dir)
    names = [spec.stage for spec in store.load_config().recipe.stages]
    if "conversation_review" not in names:
        raise UserError(f"recipe {store.load_config().recipe.name} has no conversation_review stage")
    index = names.index("conversation_review")
    if store.done_output(index - 1) is None:
        raise UserError(f"run {run_dir.name} has not reached review yet (stage {index} of {len(names)}); finish "
                        f"the earlier stages with `curate run ... --run-id {run_dir.name}`")
    return list(store.kept(index - 1))


def _image_url(sample: Sample, connection: Connection, run_id: str) -> str:
    image = sample.images[0]
    return image_url(Path(image.path), image.sha256, image.format, connection, run_id)


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
        raise UserError(f"image {path} is {len(data)} bytes; with a server of your own, serve images from its "
                        f"local-files root or cloud storage (embedding is limited to {EMBED_MAX_BYTES} bytes)")
    kind = (image_format or "png").lower()
    return f"data:image/{kind};base64,{base64.b64encode(data).decode()}"


def task_for(sample: Sample, image_url: str, run_id: str = "") -> dict:
    turns = [*sample.history, *sample.conversation]
    referenced = [turn for turn in sample.conversation if turn.speaker == "user" and turn.reference]
    focus = next((turn.focus_points for turn in sample.conversation if turn.focus_points), [])
    data = {"sample_id": sample.id, "image": image_url,
            "dialogue": [{"author": turn.speaker, "text": turn.utterance} for turn in turns],
            "rewrites": [{"text": rewrite.text, "label": f"Rewrite {number} - does it ask exactly what the question "
                                                          f"asks? {rewrite.text}"}
                         for number, rewrite in enumerate(sample.rewrites, 1)],
            "captions": [{"label": "Caption"}] if sample.caption else [],
            "references": [{"question": f"Reference answer to: {turn.utterance}"} for turn in referenced],
            "focus": [{"label": "Focus points of the last turn, one per line"}] if focus else []}
    user_turns = [turn for turn in sample.conversation if turn.speaker == "user"]
    data["checklist"] = [{"label": f"Turn {number}: {item.question} ({item.main_criteria} / {item.sub_criteria})"}
                         for number, turn in enumerate(user_turns, 1) for item in turn.checklist]
    data["checklist_turns"] = [{"label": f"Add items for turn {number}"} for number, turn in enumerate(user_turns, 1)
                               if turn.checklist]
    drafts = ([("caption_0", "caption_for_0", sample.caption)] if sample.caption else [])
    drafts += [(f"reference_{index}", f"turn_{index}", turn.reference) for index, turn in enumerate(referenced)]
    drafts += [("focus_0", "focus_for_0", "\n".join(focus))] if focus else []
    task = {"data": data, "meta": {"sample_id": sample.id}}
    if drafts:  # the model's drafts, shown pre-filled for the reviewer to correct
        producer = next((sample.generated_by[name] for name in ("reference", "caption", "focus_points")
                         if name in sample.generated_by), None)
        tag = f"{run_id}/{producer.backend}/{producer.model}" if producer else f"{run_id}/imported"
        task["predictions"] = [{"model_version": tag, "result": [
            {"from_name": name, "to_name": target, "type": "textarea", "value": {"text": [text]}}
            for name, target, text in drafts]}]
    return task


@dataclass
class PushResult:
    url: str
    pushed: int
    already: int


def push(run_dir: Path, connection: Connection, phase: int = 1, everything: bool = False) -> PushResult:
    """Phase 1: every sample entering review. Phase 2: the samples phase 1 left pending (ties), or all that phase 1
    decided when `everything`, with each phase-1 judgement shown as a prediction for the adjudicator."""
    with talking_to(connection, "the push"):
        return _push(run_dir, connection, phase, everything)


def _phase1_predictions(run_dir: Path) -> dict[str, list[dict]]:
    """Phase-1 judgements per sample as Label Studio predictions (one per reviewer)."""
    path = run_dir / REVIEW_DIR / "annotations.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    predictions: dict[str, list[dict]] = defaultdict(list)
    targets = {"caption": "caption_for_0", "focus": "focus_for_0"}
    prefixes = {"reference": "turn_", "check": "item_", "checkedit": "item_", "checkadd": "turn_items_"}
    for row in rows:
        result = []
        for name, value in row["criteria"].items():
            if name.startswith(EDITABLE):
                kind, index = name.rsplit("_", 1)
                to_name = targets.get(kind, f"{prefixes.get(kind, 'turn_')}{index}")
                result.append({"from_name": name, "to_name": to_name, "type": "choices", "value": {"choices": [value]}}
                              if kind == "check" else {"from_name": name, "to_name": to_name, "type": "textarea",
                                                       "value": {"text": [value]}})
            else:
                result.append({"from_name": name, "to_name": "dialogue" if name in CRITERIA else f"rewrite_{name[5:]}",
                               "type": "choices", "value": {"choices": [value]}})
        predictions[row["sample_id"]].append({"model_version": f"phase1-reviewer-{row['reviewer']}", "result": result})
    return predictions


def _push(run_dir: Path, connection: Connection, phase: int, everything: bool) -> PushResult:
    samples = review_input(run_dir)
    client = connection.client()
    state = load_state(run_dir)
    run_id = run_dir.name
    predictions: dict[str, list[dict]] = {}
    if phase == 2:
        outcomes_path = run_dir / REVIEW_DIR / "outcomes.json"
        if state.project_id is None or not outcomes_path.exists():
            raise UserError(f"phase 2 adjudicates phase 1: push and pull run {run_id} first")
        outcomes = json.loads(outcomes_path.read_text(encoding="utf-8"))
        wanted = {sample_id for sample_id, outcome in outcomes.items()
                  if everything or outcome["status"] == "pending"}
        samples = [sample for sample in samples if sample.id in wanted]
        predictions = _phase1_predictions(run_dir)
    project_field, pushed = ("project_id", state.pushed) if phase == 1 else ("phase2_project_id", state.phase2_pushed)
    if getattr(state, project_field) is None:
        title = f"{run_id} review round {state.round}" + (" phase 2" if phase == 2 else "")
        project = client.projects.create(title=title, label_config=labeling_config(sections_for(samples)))
        setattr(state, project_field, project.id)
        state.title = state.title or title
        if connection.files_root is not None:
            (connection.files_root / run_id).mkdir(parents=True, exist_ok=True)
            client.import_storage.local.create(project=project.id, path=str(connection.files_root / run_id),
                                               title="images", use_blob_urls=True)
        _save_state(run_dir, state)
    project_id = getattr(state, project_field)
    existing = {task.data.get("sample_id"): task.id for task in client.tasks.list(project=project_id)}
    pushed.update({sample_id: task_id for sample_id, task_id in existing.items() if sample_id})
    new = [sample for sample in samples if sample.id not in pushed]

    def saved(batch: list[Sample], task_ids: list[int]) -> None:
        pushed.update({sample.id: task_id for sample, task_id in zip(batch, task_ids)})
        _save_state(run_dir, state)

    def to_task(sample: Sample) -> dict:
        task = task_for(sample, _image_url(sample, connection, run_id), run_id)
        return {**task, "predictions": predictions[sample.id]} if predictions.get(sample.id) else task

    import_in_batches(client, project_id, new, to_task, saved)
    return PushResult(url=f"{connection.url}/projects/{project_id}", pushed=len(new), already=len(samples) - len(new))


def import_in_batches(client, project_id: int, items: list, to_task, done, batch_size: int = BATCH,
                      attempts: int = 3) -> None:
    """Import tasks `batch_size` at a time (well inside the 250K-task / 200 MB limit of one request); a batch
    that times out is retried; `done(batch, task_ids)` records each batch as soon as it is in."""
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        for attempt in range(attempts):
            try:
                reply = client.projects.import_tasks(project_id, return_task_ids=True,
                                                     request=[to_task(item) for item in batch])
                break
            except Exception as error:  # noqa: BLE001 - httpx timeouts and server errors surface as several types
                if attempt == attempts - 1 or "timeout" not in type(error).__name__.lower() + str(error).lower():
                    raise
        done(batch, list(reply.task_ids or []))


def _save_state(run_dir: Path, state: RoundState) -> None:
    _state_path(run_dir).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(_state_path(run_dir), state.__dict__)


def _single_choice(value: dict, allowed: tuple[str, ...]) -> str | None:
    chosen = value.get("choices") or []
    return chosen[0] if len(chosen) == 1 and chosen[0] in allowed else None


EDITABLE = ("caption_", "reference_", "focus_", "check_", "checkedit_", "checkadd_")


def parse_annotation(result: list[dict], rewrites: int = 0, references: int = 0, checklist: int = 0,
                     checklist_turns: int = 0) -> tuple[dict[str, str] | None, str | None, str]:
    """(answers, notes, problem): the three yes/no criteria, keep/reject for each of the task's `rewrites`
    (as `keep_<i>`), edited drafts (`caption_0`, `reference_<i>` for i < `references`, `focus_0`: text), and the
    notes; or the reason the result is invalid."""
    answers: dict[str, str] = {}
    notes = None
    for region in result or []:
        name, value = str(region.get("from_name")), region.get("value") or {}
        if name.startswith(EDITABLE) and not name.startswith(("caption_for_", "focus_for_")):
            kind, index = name.rsplit("_", 1)
            limit = {"reference": references, "check": checklist, "checkedit": checklist,
                     "checkadd": checklist_turns}.get(kind, 1)
            if not index.isdigit() or int(index) >= limit:
                return None, None, f"{name}: no such field in this task"
            if kind == "check":
                chosen = _single_choice(value, ("keep", "delete"))
                if chosen is None:
                    return None, None, f"{name}: expected keep or delete, got {value.get('choices')}"
                answers[name] = chosen
            else:
                answers[name] = "\n".join(value.get("text") or []).strip()
            continue
        if name in CRITERIA or name.startswith("keep_"):
            allowed = ("yes", "no") if name in CRITERIA else ("keep", "reject")
            chosen = _single_choice(value, allowed)
            if chosen is None or (name.startswith("keep_") and not (name[5:].isdigit() and int(name[5:]) < rewrites)):
                return None, None, f"{name}: expected one of {'/'.join(allowed)} for an existing field, got " \
                                   f"{value.get('choices')}"
            answers[name] = chosen
        elif name == "notes":
            notes = " ".join(value.get("text") or []).strip() or None
        else:
            return None, None, f"unknown field {name!r}"
    missing = [name for name in [*CRITERIA, *(f"keep_{index}" for index in range(rewrites))] if name not in answers]
    return (None, None, f"not answered: {', '.join(missing)}") if missing else (answers, notes, "")


def read_annotations(client, project_id: int, by_task: dict[int, str]) -> tuple[dict, list[dict], int]:
    """(latest valid annotation per sample and reviewer, invalid ones with the problem, non-cancelled seen)."""
    latest: dict[tuple[str, int], dict] = {}
    rejected: list[dict] = []
    seen = 0
    for task in client.tasks.list(project=project_id, fields="all"):
        sample_id = task.data.get("sample_id") or by_task.get(task.id)
        for annotation in task.annotations or []:
            if annotation.get("was_cancelled"):
                continue
            seen += 1
            answers, notes, problem = parse_annotation(
                annotation.get("result"), len(task.data.get("rewrites") or []), len(task.data.get("references") or []),
                len(task.data.get("checklist") or []), len(task.data.get("checklist_turns") or []))
            record = {"sample_id": sample_id, "task_id": task.id, "annotation_id": annotation["id"],
                      "reviewer": annotation.get("completed_by"), "updated_at": annotation.get("updated_at")}
            if problem:
                rejected.append({**record, "problem": problem})
                continue
            key = (sample_id, record["reviewer"])
            if key not in latest or (record["updated_at"] or "") >= (latest[key]["updated_at"] or ""):
                latest[key] = {**record, "criteria": answers, "notes": notes}
    return latest, rejected, seen


@dataclass
class PullResult:
    annotations: int
    applied: int
    rejected: int
    accepted_samples: int
    rejected_samples: int
    pending_samples: int
    agreement: dict


def pull(run_dir: Path, connection: Connection) -> PullResult:
    with talking_to(connection, "the pull"):
        return _pull(run_dir, connection)


def _pull(run_dir: Path, connection: Connection) -> PullResult:
    state = load_state(run_dir)
    if state.project_id is None:
        raise UserError(f"run {run_dir.name} has not been pushed for review; run `curate review push {run_dir.name}`")
    client = connection.client()
    latest, rejected, seen = read_annotations(client, state.project_id,
                                              {task_id: sample_id for sample_id, task_id in state.pushed.items()})
    adjudicated: dict[tuple[str, int], dict] = {}
    if state.phase2_project_id is not None:
        adjudicated, rejected2, seen2 = read_annotations(
            client, state.phase2_project_id, {task_id: sample_id for sample_id, task_id in state.phase2_pushed.items()})
        rejected, seen = rejected + rejected2, seen + seen2
    folder = run_dir / REVIEW_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "annotations.jsonl").write_text("".join(json.dumps(row) + "\n" for row in latest.values()),
                                              encoding="utf-8")
    (folder / "rejected.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rejected), encoding="utf-8")
    votes: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    answers: dict[str, dict[str, list[list[str]]]] = defaultdict(lambda: defaultdict(list))  # who said what
    reviewers: dict[str, list] = defaultdict(list)
    notes: dict[str, list[str]] = defaultdict(list)
    edits: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)  # sample -> field -> (updated_at, text)
    for row in [*latest.values(), *adjudicated.values()]:
        for name, text in row["criteria"].items():
            if name.startswith(EDITABLE) and text and (name not in edits[row["sample_id"]]
                                                       or row["updated_at"] >= edits[row["sample_id"]][name][0]):
                edits[row["sample_id"]][name] = (row["updated_at"] or "", text)
    for row in latest.values():
        for name, answer in row["criteria"].items():
            if name.startswith(EDITABLE):
                continue
            votes[row["sample_id"]][name].append(answer)
            answers[row["sample_id"]][name].append([f"label-studio-user-{row['reviewer']}", answer])
        reviewers[row["sample_id"]].append(row["reviewer"])
        if row["notes"]:
            notes[row["sample_id"]].append(row["notes"])
    agreement = {name: {"percent": percent_agreement({s: v[name] for s, v in votes.items()}),
                        "fleiss_kappa": fleiss_kappa({s: v[name] for s, v in votes.items()}),
                        "items_with_two_or_more": sum(len(v[name]) >= 2 for v in votes.values())}
                 for name in CRITERIA}
    write_json_atomic(folder / "agreement.json", agreement)
    second: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for row in adjudicated.values():
        for name, answer in row["criteria"].items():
            if not name.startswith(EDITABLE):
                second[row["sample_id"]][name].append(answer)
        reviewers[row["sample_id"]].append(row["reviewer"])
    outcomes = {}
    for sample_id, criteria in votes.items():
        decided = {name: majority(values) for name, values in criteria.items()}
        overruled = {name: majority(values) for name, values in second.get(sample_id, {}).items()}
        decided |= {name: value for name, value in overruled.items() if value is not None}  # phase 2 decides
        reasons = [CRITERIA[name][1] for name in CRITERIA if decided.get(name) == "no"]
        status = "rejected" if reasons else ("pending" if None in decided.values() else "accepted")
        rewrites = {name[5:]: {"keep": "kept", "reject": "rejected"}[value] for name, value in decided.items()
                    if name.startswith("keep_") and value is not None}
        outcomes[sample_id] = {"status": status, "reasons": reasons, "rewrites": rewrites,
                               "phase": 2 if sample_id in second else 1,
                               "edits": {name: text for name, (_, text) in sorted(edits.get(sample_id, {}).items())},
                               "votes": {k: list(v) for k, v in criteria.items()},
                               "answers": dict(answers[sample_id]),
                               "reviewers": [f"label-studio-user-{r}" for r in reviewers[sample_id]],
                               "notes": " | ".join(notes[sample_id]) or None, "project": state.title,
                               "round": state.round, "updated_at": datetime.now(UTC).isoformat()}
    write_json_atomic(folder / "outcomes.json", outcomes)
    counts = defaultdict(int)
    for outcome in outcomes.values():
        counts[outcome["status"]] += 1
    return PullResult(annotations=seen, applied=len(latest) + len(adjudicated), rejected=len(rejected),
                      accepted_samples=counts["accepted"], rejected_samples=counts["rejected"],
                      pending_samples=len(state.pushed) - counts["accepted"] - counts["rejected"],
                      agreement=agreement)
