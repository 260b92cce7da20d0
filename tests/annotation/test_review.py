"""Review rounds against a real Label Studio, driven through its API by people with their own accounts: push,
overlap, pull, the record, adjudication, the run and the release. (The browser round is test_review_team.py.)"""

import json
import urllib.request

import pytest

from benchcurate.annotation import review, server
from benchcurate.curation.core.errors import BackendUnavailable
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.report.run import load_report
from benchcurate.curation.review.conversation_review import read_record
from tests.factories import make_image
from tests.helpers import curate_in_process, read_prefect, resolve, run_curate
from tests.servers import free_port

pytestmark = pytest.mark.slow
YES = {"natural": "yes", "correct": "yes", "needs_image": "yes"}


@pytest.fixture(autouse=True)
def own_server(monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)


def recipe_run(tmp_path, recipe, run_id, images, overrides, reviewers=2):
    """A run of `recipe` over `images` generated images with review in human mode, run up to the review."""
    for seed in range(images):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    config = resolve(
        recipe,
        tmp_path / "out",
        input_path=str(tmp_path / "images"),
        run_id=run_id,
        overrides={**overrides, "conversation_review": {"mode": "human", "reviewers": reviewers}},
    )
    store = RunStore(tmp_path / "out" / "runs" / run_id)
    store.save_config(config)
    run_all(store.root)
    return store.root


def human_run(tmp_path, run_id="rev", reviewers=2):
    return recipe_run(
        tmp_path,
        "multiverse",
        run_id,
        4,
        {
            "image_quality": {"min_quality_score": 1},
            "category_min_size": {"min_items_per_category": 1},
            "conversation_generate": {"min_utterances": 2},
        },
        reviewers,
    )


def judged(task_id, client, extra=(), **answers):
    """Post an annotation as the client's own person: the three criteria (yes unless given) and `extra` regions."""
    result = [
        {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": [value]}}
        for name, value in {**YES, **answers}.items()
    ]
    return client.annotations.create(id=task_id, result=[*result, *extra])


def text(name, value, to_name="x"):
    return {"from_name": name, "to_name": to_name, "type": "textarea", "value": {"text": [value]}}


def test_a_review_round_from_push_to_the_release(label_studio, person, tmp_path):
    data, info, token = label_studio
    run_dir = human_run(tmp_path)
    assert "no review outcome" in load_report(run_dir).waiting  # the review stage waits for people
    connection = review.connect(data)
    first, again = review.push(run_dir, connection), review.push(run_dir, connection)
    assert (first.pushed, first.already, again.pushed, again.already) == (4, 0, 0, 4)
    client = connection.client()
    state = review.load_state(run_dir)
    project = client.projects.get(state.project_id)
    assert (
        project.maximum_annotations,
        project.overlap_cohort_percentage,
        project.show_collab_predictions,
        project.show_skip_button,
    ) == (2, 100, True, False)
    tasks = {task.data["sample_id"]: task for task in client.tasks.list(project=state.project_id, fields="all")}
    assert len(tasks) == 4 and all(task.predictions for task in tasks.values())  # the drafts (checklist items)
    request = urllib.request.Request(
        info.url + next(iter(tasks.values())).data["image"], headers={"Authorization": f"Token {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as served:  # loopback
        assert served.read()[:4] == b"\x89PNG"

    (alice_id, alice), (bob_id, bob) = person("alice@example.org"), person("bob@example.org")
    ids = sorted(tasks)
    judged(tasks[ids[0]].id, alice), judged(tasks[ids[0]].id, bob)  # accepted by both
    judged(tasks[ids[1]].id, alice, [text("notes", "general knowledge is enough")], needs_image="no")
    judged(tasks[ids[1]].id, bob, needs_image="no")  # rejected by both
    judged(tasks[ids[2]].id, alice, correct="no"), judged(tasks[ids[2]].id, bob)  # a tie
    invalid = judged(tasks[ids[3]].id, alice, natural="maybe")  # not counted
    judged(tasks[ids[3]].id, bob)
    pulled = review.pull(run_dir, connection)
    record = pulled.record
    assert (pulled.annotations, pulled.counted, len(record.rejected)) == (8, 7, 1)
    assert (record.count("accepted"), record.count("rejected"), record.count("pending")) == (1, 1, 2)
    assert record.agreement["needs_image"].percent == 1.0 and record.agreement["correct"].percent == 2 / 3
    assert record.agreement["natural"].fleiss_kappa is None  # only "yes": undefined, not 1.00
    outcome = record.samples[ids[1]]
    assert outcome.reasons == ["answerable_without_image"] and outcome.notes == ["general knowledge is enough"]
    tie = record.samples[ids[2]]
    assert tie.waiting_for == "an adjudicator to settle correct (a tie)"
    assert tie.questions["correct"].answers == {
        f"label-studio-user-{alice_id}": "no",
        f"label-studio-user-{bob_id}": "yes",
    }
    assert record.samples[ids[3]].waiting_for.startswith("1 of 2 reviews")
    assert "natural: expected one of yes/no" in record.rejected[0].problem and record.rejected[0].sample_id == ids[3]
    assert record.names[f"label-studio-user-{alice_id}"] == "alice@example.org"
    raw = (run_dir / "review" / "annotations.jsonl").read_text().splitlines()
    assert len(raw) == 8 and all(json.loads(line)["result"] for line in raw)  # as fetched, for anyone to recount
    status = curate_in_process(["review", "status", str(run_dir)])
    assert status.returncode == 0 and "alice@example.org (label-studio-user" in status.stdout
    assert "1 wait for reviewers" in status.stdout and "1 wait for an adjudicator" in status.stdout

    run_all(run_dir)
    assert "2 of 4 items have no review outcome" in load_report(run_dir).waiting

    phase2 = review.push(run_dir, connection, phase=2)  # the tie goes to an adjudicator
    assert phase2.pushed == 1 and review.push(run_dir, connection, phase=2).pushed == 0
    state = review.load_state(run_dir)
    tie_task = client.tasks.get(state.phase2_pushed[ids[2]])
    assert not tie_task.predictions and client.projects.get(state.phase2_project_id).maximum_annotations == 1
    (settle,) = tie_task.data["settle"]
    assert settle["key"] == "correct" and sorted(settle["answers"].values()) == ["no", "yes"]
    assert (
        "alice@example.org" in tie_task.data["open"][0]["html"]
        and "bob@example.org" in tie_task.data["open"][0]["html"]
    )
    _, carol = person("carol@example.org", "adjudicator")
    option = next(value for value, answer in settle["answers"].items() if answer == "yes")
    carol.annotations.create(
        id=tie_task.id,
        result=[{"from_name": "settle_0", "to_name": "question_0", "type": "choices", "value": {"choices": [option]}}],
    )
    client.annotations.delete(invalid.id)  # the curator removes it; alice redoes it
    judged(tasks[ids[3]].id, alice)
    record = review.pull(run_dir, connection).record
    assert record.samples[ids[2]].status == "accepted" and record.samples[ids[2]].phase == 2
    assert record.count("pending") == 0 and not record.rejected
    from benchcurate.curation.report.html import disagreements

    shown = disagreements(record)
    assert [(found.sample, found.status, found.adjudicated) for found in shown] == [(ids[2], "accepted", True)]
    before = (run_dir / "review" / "record.json").read_bytes()
    again = review.pull(run_dir, connection).record  # a re-pull changes nothing
    assert again.model_copy(update={"pulled_at": record.pulled_at}) == read_record(run_dir) == record
    assert (run_dir / "review" / "record.json").read_bytes() == before

    run_all(run_dir)
    final = load_report(run_dir)
    assert final.complete and final.waiting is None
    stage = final.stages[-1]
    assert stage.stage == "conversation_review" and stage.by_reason == {"reviewer_rejected": 1} and stage.kept == 3
    kept = [json.loads(line) for line in RunStore(run_dir).last_kept_path().read_text().splitlines()]
    assert {row["review"]["mode"] for row in kept} == {"human"}
    adjudicated = next(row for row in kept if row["id"] == ids[2])
    assert (
        adjudicated["review"]["reviewers"][-1].startswith("label-studio-user-")
        and len(adjudicated["review"]["reviewers"]) == 3
    )
    from benchcurate.curation.release.writer import write_release

    release = write_release(run_dir, tmp_path / "out")
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["review_projects"] == ["rev review round 1"] and manifest["review_modes"] == ["human"]
    assert manifest["review"]["reviewers_per_sample"] == 2 and manifest["review"]["people"] == 3
    assert manifest["review"]["adjudicated_samples"] == 1 and "alice" not in json.dumps(manifest)  # ids, no names
    import pyarrow.parquet as pq

    table = pq.read_table(next((release / "data").glob("*.parquet")), columns=["index", "review_reviewers"])
    assert all(len(people) >= 2 for people in table.column("review_reviewers").to_pylist())
    assert "review_reviewers" in (release / "README.md").read_text()
    logs = [path for path in run_dir.rglob("*") if path.is_file() and token.encode() in path.read_bytes()]
    assert logs == []


def test_an_annotation_changed_by_someone_else_or_two_from_one_person_do_not_count(label_studio, person, tmp_path):
    data, _, _ = label_studio
    run_dir = human_run(tmp_path, "tamper")
    connection = review.connect(data)
    review.push(run_dir, connection)
    (_, alice), (bob_id, bob) = person("alice@example.org"), person("bob@example.org")
    ids = sorted(review.load_state(run_dir).pushed.items())
    (first, first_task), (second, second_task) = ids[0], ids[1]
    mine = judged(first_task, alice)
    judged(first_task, bob)
    bob.annotations.update(
        mine.id, result=[{"from_name": "natural", "to_name": "image", "type": "choices", "value": {"choices": ["no"]}}]
    )  # bob opens alice's from the list
    judged(second_task, alice), judged(second_task, alice, correct="no"), judged(second_task, bob)
    record = review.pull(run_dir, connection).record
    problems = {entry.annotation_id: entry.problem for entry in record.rejected}
    assert problems[mine.id].startswith(f"written or last changed by label-studio-user-{bob_id}, not by its author")
    assert record.samples[first].status == "pending" and record.samples[first].waiting_for.startswith("1 of 2")
    assert (
        record.samples[second].status == "pending"
        and sum("2 different annotations" in p for p in problems.values()) == 2
    )


def test_a_server_going_down_between_pulls_loses_nothing(tmp_path, monkeypatch):
    with pytest.raises(BackendUnavailable, match="curate ls up"):
        review.connect(tmp_path / "no-server")
    data = tmp_path / "ls"
    port = free_port()
    server.up(data, port)
    try:
        run_dir = human_run(tmp_path, "down", reviewers=1)
        connection = review.connect(data)
        review.push(run_dir, connection)
        client = connection.client()
        for task_id in review.load_state(run_dir).pushed.values():
            client.annotations.create(
                id=task_id,
                result=[
                    {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": ["yes"]}}
                    for name in YES
                ],
            )
        server.down(data)
        with pytest.raises(BackendUnavailable, match="stopped answering during the pull"):
            review.pull(run_dir, connection)
        assert not (run_dir / "review" / "record.json").exists()
        server.up(data, port)
        record = review.pull(run_dir, review.connect(data)).record
        # the admin posted them: they count as the admin's, one reviewer each being enough here
        assert record.count("accepted") == 4 and record.count("pending") == 0
    finally:
        server.down(data)


def test_a_run_in_human_mode_pushes_its_round_and_waits(label_studio, prefect_server, tmp_path):
    _, info, token = label_studio
    for seed in range(3):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    env = {"PREFECT_API_URL": prefect_server, "LABEL_STUDIO_URL": info.url, "LABEL_STUDIO_API_KEY": token}
    result = run_curate(
        [
            "run",
            "multiverse",
            "--input",
            str(tmp_path / "images"),
            "--run-id",
            "human",
            "--progress",
            "log",
            "--set",
            "image_quality.min_quality_score=1",
            "--set",
            "category_min_size.min_items_per_category=1",
            "--set",
            "conversation_review.mode=human",
        ],
        tmp_path,
        env,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 5, output[-3000:]
    assert "review round pushed (3 new, 0 already there)" in output and f"{info.url}/projects/" in output
    assert token not in output
    _, artifacts = read_prefect(prefect_server)
    (link,) = [artifact for artifact in artifacts if artifact.key == "review-multiverse"]
    assert f"[Review in Label Studio]({info.url}/projects/" in link.data and token not in link.data


def test_each_paraphrase_rewrite_is_kept_or_rejected_by_its_reviewers(label_studio, person, tmp_path):
    data, _, _ = label_studio
    root = recipe_run(tmp_path, "alignmmbench", "para", 2, {"dialogue_context_generate": {"share": 0.0}})
    connection = review.connect(data)
    review.push(root, connection)
    client = connection.client()
    for email in ("alice@example.org", "bob@example.org"):
        _, own = person(email)
        for task_id in review.load_state(root).pushed.values():
            task = client.tasks.get(task_id)
            assert len(task.data["rewrites"]) == 5 and "the reference answers" in task.data["questions"]["correct"]
            judged(
                task_id,
                own,
                [
                    {
                        "from_name": f"rewrite_{index}",
                        "to_name": f"rewrite_text_{index}",
                        "type": "choices",
                        "value": {"choices": ["reject" if index == 1 else "keep"]},
                    }
                    for index in range(5)
                ],
            )
    record = review.pull(root, connection).record
    assert record.count("accepted") == 2 and not record.rejected
    assert record.agreement["rewrite"].percent == 1.0
    run_all(root)
    for row in map(json.loads, RunStore(root).last_kept_path().read_text().splitlines()):
        assert [rewrite["status"] for rewrite in row["rewrites"]] == ["kept", "rejected", "kept", "kept", "kept"]
        assert row["review"]["mode"] == "human"


def test_convbench_drafts_are_predictions_and_a_fix_wins_over_the_draft_sent_back(label_studio, person, tmp_path):
    data, _, _ = label_studio
    root = recipe_run(tmp_path, "convbench", "cb", 1, {})
    connection = review.connect(data)
    review.push(root, connection)
    client = connection.client()
    (task_id,) = review.load_state(root).pushed.values()
    task = client.tasks.get(task_id)
    drafts = {region["from_name"]: region["value"]["text"][0] for region in task.predictions[0].result}
    assert set(drafts) == {"caption", "reference_0", "reference_1", "reference_2", "focus_2"}
    assert task.predictions[0].model_version == "cb drafts"  # one version per project: every task shows its drafts
    assert client.projects.get(review.load_state(root).project_id).model_version == "cb drafts"
    fix = "Because the light comes from the left, it is morning:\n3 windows, 2024 on the sign, café"
    _, alice = person("alice@example.org")
    _, bob = person("bob@example.org")
    judged(task_id, alice, [text("reference_1", fix), text("focus_2", "1. names the light\n2 lamps are named")])
    judged(task_id, bob, [text(name, value) for name, value in drafts.items()])  # the drafts, unchanged
    record = review.pull(root, connection).record
    assert record.count("accepted") == 1
    run_all(root)
    (row,) = map(json.loads, RunStore(root).last_kept_path().read_text().splitlines())
    turns = row["conversation"]
    assert turns[1]["reference"] == fix and turns[2]["focus_points"] == ["names the light", "2 lamps are named"]
    assert turns[0]["reference"] == drafts["reference_0"] and row["caption"] == drafts["caption"]


def test_checklist_items_are_kept_deleted_rewritten_or_added(label_studio, person, tmp_path):
    data, _, _ = label_studio
    root = human_run(tmp_path, "checks")
    connection = review.connect(data)
    review.push(root, connection)
    sample_id, task_id = sorted(review.load_state(root).pushed.items())[0]
    before = {sample.id: sample for sample in review.review_input(root)}[sample_id]
    first_turn = before.conversation[0].checklist
    for email in ("alice@example.org", "bob@example.org"):
        _, own = person(email)
        for other_id, other_task in review.load_state(root).pushed.items():
            extra = (
                []
                if other_id != sample_id
                else [
                    {
                        "from_name": "check_0_0",
                        "to_name": "item_0_0",
                        "type": "choices",
                        "value": {"choices": ["delete"]},
                    },
                    {
                        "from_name": "check_0_1",
                        "to_name": "item_0_1",
                        "type": "choices",
                        "value": {"choices": ["rewrite"]},
                    },
                    text("checkedit_0_1", "Does the answer name both colours?"),
                    text("checkadd_0", "Does the answer avoid guessing the brand? | Factual Correctness | no guessing"),
                ]
            )
            judged(other_task, own, extra)
    review.pull(root, connection)
    run_all(root)
    row = next(
        r for r in map(json.loads, RunStore(root).last_kept_path().read_text().splitlines()) if r["id"] == sample_id
    )
    questions = [(item["question"], item["source_model"]) for item in row["conversation"][0]["checklist"]]
    assert len(questions) == len(first_turn)  # one deleted, one added
    assert first_turn[0].question not in [q for q, _ in questions]
    assert questions[0] == ("Does the answer name both colours?", "reviewer")
    assert questions[-1] == ("Does the answer avoid guessing the brand?", "reviewer")
    assert row["conversation"][2]["checklist"] == before.conversation[2].model_dump()["checklist"]


def test_people_are_added_who_can_log_in_and_are_listed_with_their_role(label_studio, monkeypatch):
    import httpx

    data, info, _ = label_studio
    bad = curate_in_process(["ls", "user", "add", "not-an-email", "--data", str(data)])
    assert bad.returncode == 2 and "is not an email address" in bad.stderr
    added = curate_in_process(["ls", "user", "add", "dora@example.org", "--role", "adjudicator", "--data", str(data)])
    assert added.returncode == 0, added.stderr
    password = added.stdout.split("password (shown once, not stored; pass it on privately): ")[1].strip()
    with httpx.Client(base_url=info.url) as browser:
        browser.get("/user/login/")
        reply = browser.post(
            "/user/login/",
            data={
                "email": "dora@example.org",
                "password": password,
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            },
            headers={"Referer": f"{info.url}/user/login/"},
        )
        assert (
            reply.status_code == 302 and browser.get("/api/current-user/whoami").json()["email"] == "dora@example.org"
        )
    assert password not in "".join(path.read_text(errors="replace") for path in data.glob("*.log"))
    again = curate_in_process(["ls", "user", "add", "dora@example.org", "--role", "annotator", "--data", str(data)])
    assert "already there; role set, annotator" in again.stdout and "password" not in again.stdout
    monkeypatch.setenv("CURATE_REVIEWER_PASSWORD", "short")
    refused = curate_in_process(["ls", "user", "add", "eda@example.org", "--data", str(data)])
    assert refused.returncode == 2 and "8–128 characters" in refused.stderr and "short" not in refused.stderr
    listed = curate_in_process(["ls", "user", "list", "--data", str(data)]).stdout
    assert any(line.split()[1:] == ["annotator", "dora@example.org"] for line in listed.splitlines())
