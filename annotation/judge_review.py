"""The judge's calls of an eval as a Label Studio project: people make the same calls, and `curate eval agreement`
compares them with the judge's.

Push (`curate eval review push RESULTS`): one project per results folder; one task per judge call that has a score
(`curation.evaluation.agreement.judge_items`), showing what the judge was shown (and the image when the judge saw
it) with the judge's scale as single choices; the task carries its item id, so a re-push adds nothing twice; the
judge's own label is not shown. Pull (`curate eval review pull RESULTS`): the latest valid annotation per reviewer
and task into `<RESULTS>/review/labels.jsonl` (an answer off the scale is reported and left out).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from html import escape
from pathlib import Path

from benchcurate.annotation.review import Connection, image_url, import_in_batches, talking_to
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.files import replacing
from benchcurate.curation.engine.store import write_json_atomic
from benchcurate.curation.evaluation.agreement import LABELS, REVIEW_DIR, JudgeItem, judge_items
from benchcurate.curation.evaluation.engine import read_results
from benchcurate.curation.release.reading import image_file, open_release, rows


@dataclass
class JudgeRoundState:
    project_id: int | None = None
    pushed: dict[str, int] = field(default_factory=dict)  # item id -> task id


def _state_path(results_folder: Path) -> Path:
    return results_folder / REVIEW_DIR / "state.json"


def load_state(results_folder: Path) -> JudgeRoundState:
    path = _state_path(results_folder)
    return JudgeRoundState(**json.loads(path.read_text(encoding="utf-8"))) if path.exists() else JudgeRoundState()


def labeling_config(scale: tuple[str, ...], with_image: bool) -> str:
    image = '<Image name="image" value="$image" maxWidth="520px"/>' if with_image else ""
    choices = "".join(f'<Choice value="{escape(value)}"/>' for value in scale)
    return (
        '<View><Header value="Make the judge\'s call: below is exactly what the judge was shown."/>'
        f'{image}<Text name="shown" value="$shown"/>'
        f'<Choices name="verdict" toName="shown" choice="single" showInline="true" required="true">{choices}'
        "</Choices></View>"
    )


@dataclass
class JudgePush:
    url: str
    pushed: int
    already: int


def push(results_folder: Path, connection: Connection) -> JudgePush:
    with talking_to(connection, "the push"):
        return _push(results_folder.resolve(), connection)


def _push(results_folder: Path, connection: Connection) -> JudgePush:
    results = read_results(results_folder)
    _recipe, items = judge_items(results_folder)
    if not items:
        raise UserError(f"{results_folder} has no scored judge call to review")
    state = load_state(results_folder)
    client = connection.client()
    folder = f"judge-{results.release}-{results.version}-{results_folder.name}"
    if state.project_id is None:
        about = f"{results.model} on {results.release} {results.version}, judged by {results.judge_model}"
        project = client.projects.create(
            title=f"judge review: {about}"[:50],
            description=about,
            label_config=labeling_config(items[0].scale, items[0].with_image),
        )
        state.project_id = project.id
        if connection.files_root is not None and items[0].with_image:
            (connection.files_root / folder).mkdir(parents=True, exist_ok=True)
            client.import_storage.local.create(
                project=project.id, path=str(connection.files_root / folder), title="images", use_blob_urls=True
            )
        _save(results_folder, state)
    existing = {task.data.get("item_id"): task.id for task in client.tasks.list(project=state.project_id)}
    state.pushed.update({item_id: task_id for item_id, task_id in existing.items() if item_id})
    new = [item for item in items if item.item_id not in state.pushed]
    images = _images(results, {item.sample_id for item in new if item.with_image}, results_folder)

    def to_task(item: JudgeItem) -> dict:
        data = {"item_id": item.item_id, "shown": item.shown}
        if item.with_image:
            ref = images[item.sample_id]
            data["image"] = image_url(Path(ref.path), ref.sha256, None, connection, folder)
        return {"data": data, "meta": {"item_id": item.item_id}}

    def saved(batch: list[JudgeItem], task_ids: list[int]) -> None:
        state.pushed.update({item.item_id: task_id for item, task_id in zip(batch, task_ids)})
        _save(results_folder, state)

    import_in_batches(client, state.project_id, new, to_task, saved)
    return JudgePush(f"{connection.url}/projects/{state.project_id}", len(new), len(items) - len(new))


def _images(results, sample_ids: set[str], results_folder: Path) -> dict:
    """The samples' images from the release the eval read, written under the results' review folder."""
    if not sample_ids:
        return {}
    if not results.release_folder or not Path(results.release_folder).is_dir():
        raise UserError(
            f"the release this eval read ({results.release_folder}) is not there any more; the "
            f"judge saw the images, so the people must too"
        )
    release = open_release(Path(results.release_folder))
    found = {}
    for row in rows(release, "test" if "test" in release.manifest.splits else next(iter(release.manifest.splits))):
        if row["index"] in sample_ids:
            found[row["index"]] = image_file(row["image"], results_folder / REVIEW_DIR / "images")
    return found


def _save(results_folder: Path, state: JudgeRoundState) -> None:
    _state_path(results_folder).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(_state_path(results_folder), asdict(state))


@dataclass
class JudgePull:
    labels: int
    rejected: int
    path: Path


def pull(results_folder: Path, connection: Connection) -> JudgePull:
    with talking_to(connection, "the pull"):
        return _pull(results_folder.resolve(), connection)


def _pull(results_folder: Path, connection: Connection) -> JudgePull:
    state = load_state(results_folder)
    if state.project_id is None:
        raise UserError(
            f"the judge's calls of {results_folder} were not pushed; run `curate eval review push "
            f"{results_folder}` first"
        )
    _, items = judge_items(results_folder)
    scales = {item.item_id: item.scale for item in items}
    latest: dict[tuple[str, object], dict] = {}
    rejected = 0
    for task in connection.client().tasks.list(project=state.project_id, fields="all"):
        item_id = task.data.get("item_id")
        for annotation in task.annotations or []:
            if annotation.get("was_cancelled"):
                continue
            chosen = [
                value
                for entry in annotation.get("result") or []
                if entry.get("from_name") == "verdict"
                for value in (entry.get("value") or {}).get("choices") or []
            ]
            if len(chosen) != 1 or chosen[0] not in scales.get(item_id, ()):
                rejected += 1
                continue
            record = {
                "item_id": item_id,
                "reviewer": annotation.get("completed_by"),
                "label": chosen[0],
                "updated_at": annotation.get("updated_at"),
            }
            key = (item_id, record["reviewer"])
            if key not in latest or (record["updated_at"] or "") >= (latest[key]["updated_at"] or ""):
                latest[key] = record
    path = results_folder / REVIEW_DIR / LABELS
    with replacing(path) as partial:
        partial.write_text("".join(json.dumps(record) + "\n" for record in latest.values()), encoding="utf-8")
    return JudgePull(len(latest), rejected, path)
