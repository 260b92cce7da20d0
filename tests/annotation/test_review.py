"""A review round against a real Label Studio: push, two annotators, pull, agreement, outcomes in the run."""

import json
from pathlib import Path

import pytest

from benchcurate.annotation import review, server
from benchcurate.curation.errors import BackendUnavailable
from benchcurate.curation.report import load_report
from benchcurate.curation.runner import run_all
from benchcurate.curation.store import RunStore
from tests.factories import make_image
from tests.helpers import read_prefect, resolve, run_curate
from tests.servers import free_port

pytestmark = pytest.mark.slow


def recipe_run(tmp_path, recipe, run_id, images, overrides):
    """A run of `recipe` over `images` generated images with review in human mode, run up to the review."""
    for seed in range(images):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    config = resolve(recipe, tmp_path / "out", input_path=str(tmp_path / "images"), run_id=run_id,
                         overrides={**overrides, "conversation_review": {"mode": "human"}})
    store = RunStore(tmp_path / "out" / "runs" / run_id)
    store.save_config(config)
    run_all(store.root)
    return store.root


def human_run(tmp_path, run_id="rev"):
    return recipe_run(tmp_path, "multiverse", run_id, 4, {
        "image_quality": {"min_quality_score": 1}, "category_min_size": {"min_items_per_category": 1},
        "conversation_generate": {"min_utterances": 2}})


def annotate(client, task_id, user_id, natural="yes", correct="yes", needs_image="yes", notes=None):
    result = [{"from_name": name, "to_name": "dialogue", "type": "choices", "value": {"choices": [value]}}
              for name, value in (("natural", natural), ("correct", correct), ("needs_image", needs_image))]
    if notes:
        result.append({"from_name": "notes", "to_name": "dialogue", "type": "textarea", "value": {"text": [notes]}})
    client.annotations.create(id=task_id, result=result, completed_by=user_id)


def test_a_review_round_from_push_to_the_release_funnel(label_studio, tmp_path, monkeypatch):
    data, info, token = label_studio
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    run_dir = human_run(tmp_path)
    report = load_report(run_dir)
    assert report.waiting and "no review outcome" in report.waiting  # the review stage waits for people

    connection = review.connect(data)
    first = review.push(run_dir, connection)
    again = review.push(run_dir, connection)
    assert first.pushed == 4 and first.already == 0 and again.pushed == 0 and again.already == 4
    client = connection.client()
    tasks = {task.data["sample_id"]: task for task in client.tasks.list(project=review.load_state(run_dir).project_id)}
    assert len(tasks) == 4 and all(task.data["image"].startswith("/data/local-files/?d=") for task in tasks.values())
    image = client.tasks.get(next(iter(tasks.values())).id).data["image"]
    import urllib.request
    request = urllib.request.Request(info.url + image, headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=10) as served:  # noqa: S310 - loopback
        assert served.read()[:4] == b"\x89PNG"

    alice = client.users.create(username="alice", email="alice@localhost", password="pw-alice-123456").id
    bob = client.users.create(username="bob", email="bob@localhost", password="pw-bob-1234567").id
    ids = sorted(tasks)
    annotate(client, tasks[ids[0]].id, alice)                                  # accepted by both
    annotate(client, tasks[ids[0]].id, bob)
    annotate(client, tasks[ids[1]].id, alice, needs_image="no", notes="general knowledge is enough")
    annotate(client, tasks[ids[1]].id, bob, needs_image="no")                  # rejected by both
    annotate(client, tasks[ids[2]].id, alice, correct="no")                     # a tie: pending
    annotate(client, tasks[ids[2]].id, bob)
    client.annotations.create(id=tasks[ids[3]].id, completed_by=alice,         # invalid: a criterion missing
                              result=[{"from_name": "natural", "to_name": "dialogue", "type": "choices",
                                       "value": {"choices": ["maybe"]}}])
    pulled = review.pull(run_dir, connection)
    assert (pulled.annotations, pulled.applied, pulled.rejected) == (7, 6, 1)
    assert (pulled.accepted_samples, pulled.rejected_samples, pulled.pending_samples) == (1, 1, 2)
    assert pulled.agreement["needs_image"]["percent"] == 1.0 and pulled.agreement["correct"]["percent"] == 2 / 3
    outcomes = json.loads((run_dir / "review" / "outcomes.json").read_text())
    assert outcomes[ids[1]]["reasons"] == ["answerable_without_image"]
    assert outcomes[ids[1]]["notes"] == "general knowledge is enough" and outcomes[ids[2]]["status"] == "pending"
    tie = outcomes[ids[2]]["answers"]["correct"]  # who said what, for the report's disagreements
    assert len({answer for _, answer in tie}) == 2 and len({reviewer for reviewer, _ in tie}) == 2
    rejected = (run_dir / "review" / "rejected.jsonl").read_text()
    assert "expected one of yes/no" in rejected and ids[3] in rejected

    run_all(run_dir)
    assert "2 of 4 items have no review outcome" in load_report(run_dir).waiting  # still waiting on two

    phase2 = review.push(run_dir, connection, phase=2)                           # the tie goes to an adjudicator
    assert phase2.pushed == 1 and review.push(run_dir, connection, phase=2).pushed == 0
    state = review.load_state(run_dir)
    tie_task = client.tasks.get(state.phase2_pushed[ids[2]])
    assert len(tie_task.predictions) == 2  # both phase-1 judgements shown
    carol = client.users.create(username="carol", email="carol@localhost", password="pw-carol-123456").id
    annotate(client, tie_task.id, carol, correct="yes")
    annotate(client, tasks[ids[3]].id, bob)
    review.pull(run_dir, connection)
    outcomes = json.loads((run_dir / "review" / "outcomes.json").read_text())
    assert outcomes[ids[2]]["status"] == "accepted" and outcomes[ids[2]]["phase"] == 2
    from benchcurate.curation.html_report import disagreements
    shown = disagreements(run_dir / "review" / "outcomes.json")
    assert [(found["sample"], found["status"], found["adjudicated"]) for found in shown] == [(ids[2], "accepted", True)]
    run_all(run_dir)
    final = load_report(run_dir)
    assert final.complete and final.waiting is None
    stage = final.stages[-1]
    assert stage.stage == "conversation_review" and stage.by_reason == {"reviewer_rejected": 1} and stage.kept == 3
    final_dir = RunStore(run_dir).last_kept_path().parent
    kept = [json.loads(line) for line in (final_dir / "kept.jsonl").read_text().splitlines()]
    assert {row["review"]["mode"] for row in kept} == {"human"} and all(row["review"]["reviewers"] for row in kept)
    from benchcurate.curation.release.writer import write_release
    manifest = json.loads((write_release(run_dir, tmp_path / "out") / "manifest.json").read_text())
    assert manifest["review_projects"] == ["rev review round 1"] and manifest["review_modes"] == ["human"]
    logs = [path for path in run_dir.rglob("*") if path.is_file() and token.encode() in path.read_bytes()]
    assert logs == []


def test_a_server_going_down_between_pulls_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    with pytest.raises(BackendUnavailable, match="curate ls up"):
        review.connect(tmp_path / "no-server")
    data = tmp_path / "ls"
    port = free_port()
    server.up(data, port)
    try:
        run_dir = human_run(tmp_path, "down")
        connection = review.connect(data)
        review.push(run_dir, connection)
        client = connection.client()
        reviewer = client.users.create(username="dana", email="dana@localhost", password="pw-dana-1234567").id
        for task_id in review.load_state(run_dir).pushed.values():
            annotate(client, task_id, reviewer)
        server.down(data)
        with pytest.raises(BackendUnavailable, match="stopped answering during the pull"):
            review.pull(run_dir, connection)
        assert not (run_dir / "review" / "outcomes.json").exists()
        server.up(data, port)
        pulled = review.pull(run_dir, review.connect(data))
        assert pulled.applied == 4 and pulled.accepted_samples == 4 and pulled.pending_samples == 0
    finally:
        server.down(data)


def test_a_run_in_human_mode_pushes_its_round_and_waits(label_studio, prefect_server, tmp_path):
    _, info, token = label_studio
    for seed in range(3):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    env = {"PREFECT_API_URL": prefect_server, "LABEL_STUDIO_URL": info.url, "LABEL_STUDIO_API_KEY": token}
    result = run_curate(["run", "multiverse", "--input", str(tmp_path / "images"), "--run-id", "human",
                         "--progress", "log", "--set", "image_quality.min_quality_score=1",
                         "--set", "category_min_size.min_items_per_category=1",
                         "--set", "conversation_review.mode=human"], tmp_path, env)
    output = result.stdout + result.stderr
    assert result.returncode == 5, output[-3000:]
    assert "review round pushed (3 new, 0 already there)" in output and f"{info.url}/projects/" in output
    assert token not in output
    _, artifacts = read_prefect(prefect_server)
    (link,) = [artifact for artifact in artifacts if artifact.key == "review-multiverse"]
    assert f"[Review in Label Studio]({info.url}/projects/" in link.data and token not in link.data


SHOT_DIR = Path(__file__).resolve().parents[1] / "output"


def test_the_review_page_shows_the_dialogue_and_the_image(label_studio, tmp_path, monkeypatch):
    import os
    import shutil
    import subprocess
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    data, info, _ = label_studio
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    playwright = server.REPO / ".ls" / "pw" / "node_modules" / "playwright-core"
    assert chromium and playwright.exists(), "run `make test` (it installs Chromium and playwright-core)"
    run_dir = human_run(tmp_path, "shot")
    review.push(run_dir, review.connect(data))
    state = review.load_state(run_dir)
    sample_id, task_id = sorted(state.pushed.items())[0]
    samples = {sample.id: sample for sample in review.review_input(run_dir)}
    first_user_turn = samples[sample_id].conversation[0].utterance
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    shot = SHOT_DIR / "review_page.png"
    home = tmp_path / "chrome-home"
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "CHROMIUM_PATH": chromium,
           "PLAYWRIGHT_CORE": str(playwright)}
    result = subprocess.run(["node", str(Path(__file__).with_name("shot.js")), info.url, server.USERNAME,
                             (data / "password").read_text().strip(), str(state.project_id), str(task_id), str(shot),
                             first_user_turn[:60]], capture_output=True, text=True, env=env, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"dialogue": True, "images_loaded": found["images_loaded"], "choices": True}
    assert found["images_loaded"] >= 1 and shot.stat().st_size > 20_000


def test_each_paraphrase_rewrite_is_kept_or_rejected_by_its_reviewers(label_studio, tmp_path, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    data, _, _ = label_studio
    root = recipe_run(tmp_path, "alignmmbench", "para", 2, {"dialogue_context_generate": {"share": 0.0}})
    connection = review.connect(data)
    review.push(root, connection)
    client = connection.client()
    reviewer = client.users.create(username="erin", email="erin@localhost", password="pw-erin-1234567").id
    for sample_id, task_id in review.load_state(root).pushed.items():
        task = client.tasks.get(task_id)
        assert len(task.data["rewrites"]) == 5
        result = [{"from_name": name, "to_name": "dialogue", "type": "choices", "value": {"choices": ["yes"]}}
                  for name in review.CRITERIA]
        result += [{"from_name": f"keep_{index}", "to_name": f"rewrite_{index}", "type": "choices",
                    "value": {"choices": ["reject" if index == 1 else "keep"]}} for index in range(5)]
        client.annotations.create(id=task_id, result=result, completed_by=reviewer)
    pulled = review.pull(root, connection)
    assert pulled.accepted_samples == 2 and pulled.rejected == 0
    run_all(root)
    final_dir = RunStore(root).last_kept_path().parent
    for row in map(json.loads, (final_dir / "kept.jsonl").read_text().splitlines()):
        assert [rewrite["status"] for rewrite in row["rewrites"]] == ["kept", "rejected", "kept", "kept", "kept"]
        assert row["review"]["mode"] == "human"


def test_convbench_drafts_are_prefilled_and_the_reviewers_edits_replace_them(label_studio, tmp_path, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    data, _, _ = label_studio
    root = recipe_run(tmp_path, "convbench", "cb", 1, {})
    connection = review.connect(data)
    review.push(root, connection)
    client = connection.client()
    (task_id,) = review.load_state(root).pushed.values()
    task = client.tasks.get(task_id)
    drafts = {region["from_name"]: region["value"]["text"][0] for region in task.predictions[0].result}
    assert set(drafts) == {"caption_0", "reference_0", "reference_1", "reference_2", "focus_0"}
    assert task.predictions[0].model_version == "cb/offline-heuristic/heuristics-v2"  # run id, backend, model
    assert len(task.data["references"]) == 3 and task.data["captions"] and task.data["focus"]
    reviewer = client.users.create(username="fay", email="fay@localhost", password="pw-fay-12345678").id
    result = [{"from_name": name, "to_name": "dialogue", "type": "choices", "value": {"choices": ["yes"]}}
              for name in review.CRITERIA]
    result += [{"from_name": "reference_1", "to_name": "turn_1", "type": "textarea",
                "value": {"text": ["Because the light comes from the left, it is morning."]}},
               {"from_name": "focus_0", "to_name": "focus_for_0", "type": "textarea",
                "value": {"text": ["1. names the light\n2. stays under 50 words"]}}]
    client.annotations.create(id=task_id, result=result, completed_by=reviewer)
    assert review.pull(root, connection).accepted_samples == 1
    run_all(root)
    final_dir = RunStore(root).last_kept_path().parent
    (row,) = map(json.loads, (final_dir / "kept.jsonl").read_text().splitlines())
    turns = row["conversation"]
    assert turns[1]["reference"] == "Because the light comes from the left, it is morning."
    assert turns[0]["reference"] == drafts["reference_0"] and row["caption"] == drafts["caption_0"]
    assert turns[2]["focus_points"] == ["names the light", "stays under 50 words"]


def test_checklist_items_are_kept_deleted_rewritten_or_added(label_studio, tmp_path, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    data, _, _ = label_studio
    root = human_run(tmp_path, "checks")
    connection = review.connect(data)
    review.push(root, connection)
    client = connection.client()
    sample_id, task_id = sorted(review.load_state(root).pushed.items())[0]
    before = {sample.id: sample for sample in review.review_input(root)}[sample_id]
    first_turn = before.conversation[0].checklist
    task = client.tasks.get(task_id)
    assert len(task.data["checklist"]) == sum(len(t.checklist) for t in before.conversation)
    reviewer = client.users.create(username="gil", email="gil@localhost", password="pw-gil-12345678").id
    result = [{"from_name": name, "to_name": "dialogue", "type": "choices", "value": {"choices": ["yes"]}}
              for name in review.CRITERIA]
    result += [{"from_name": "check_0", "to_name": "item_0", "type": "choices", "value": {"choices": ["delete"]}},
               {"from_name": "checkedit_1", "to_name": "item_1", "type": "textarea",
                "value": {"text": ["Does the answer name both colours?"]}},
               {"from_name": "checkadd_0", "to_name": "turn_items_0", "type": "textarea",
                "value": {"text": ["Does the answer avoid guessing the brand? | Factual Correctness | no guessing"]}}]
    client.annotations.create(id=task_id, result=result, completed_by=reviewer)
    review.pull(root, connection)
    others = [tid for sid, tid in review.load_state(root).pushed.items() if sid != sample_id]
    for other in others:
        annotate(client, other, reviewer)
    review.pull(root, connection)
    run_all(root)
    final_dir = RunStore(root).last_kept_path().parent
    row = next(r for r in map(json.loads, (final_dir / "kept.jsonl").read_text().splitlines()) if r["id"] == sample_id)
    questions = [(item["question"], item["source_model"]) for item in row["conversation"][0]["checklist"]]
    assert len(questions) == len(first_turn)  # one deleted, one added
    assert first_turn[0].question not in [q for q, _ in questions]
    assert questions[0] == ("Does the answer name both colours?", "reviewer")
    assert questions[-1] == ("Does the answer avoid guessing the brand?", "reviewer")
    assert row["conversation"][2]["checklist"] == before.conversation[2].model_dump()["checklist"]


def test_each_round_gets_the_config_of_its_review_kinds():
    from benchcurate.schemas import ChecklistItem, Rewrite, Turn
    from tests.factories import make_sample
    check = ChecklistItem(question="q?", main_criteria="m", sub_criteria="s")
    multiverse = make_sample(1, conversation=[Turn(speaker="user", utterance="u", checklist=[check])])
    convbench = make_sample(2, caption="c", conversation=[Turn(speaker="user", utterance="u", reference="r")])
    alignmm = make_sample(3, rewrites=[Rewrite(text="t")], conversation=[Turn(speaker="user", utterance="u")])
    assert review.sections_for([multiverse]) == ("checklists",)
    assert review.sections_for([convbench]) == ("drafts",)
    assert review.sections_for([alignmm, convbench]) == ("rewrites", "drafts")
    plain = review.labeling_config(())
    assert "keep_{{idx}}" not in plain and "checkadd_" not in plain and 'name="natural"' in plain
    assert "checkadd_{{idx}}" in review.labeling_config(("checklists",))
