"""The judge against people, through a real Label Studio: an eval's judge calls pushed as tasks, two reviewers
answering, pulled back, and `curate eval agreement` computing percent agreement and Cohen's kappa."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from benchcurate.annotation import judge_review, review
from benchcurate.curation.evaluation.agreement import judge_items
from benchcurate.curation.evaluation.engine import evaluate
from benchcurate.curation.release.writer import write_release
from benchcurate.schemas.evaluation import EvalOptions
from tests.fakes.judges import marker_world
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import SMALL, curate_in_process, finished_run

pytestmark = pytest.mark.slow
DISAGREE = 3  # tasks on which the second reviewer gives the other end of the scale


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("judged")
    release = write_release(finished_run(tmp_path, "mv", "multiverse", images=6, overrides=SMALL), tmp_path / "out")
    with FakeOpenAIServer(
        responder=marker_world({"candidate-vlm": 0.5}), models=("candidate-vlm", "judge-vlm")
    ) as fake:
        return evaluate(
            EvalOptions(
                release=str(release),
                candidate={"model": "candidate-vlm", "base_url": fake.base_url},
                judge={"model": "judge-vlm", "base_url": fake.base_url},
                out=str(tmp_path / "ev"),
            )
        )


def kappa(pairs):
    """Cohen's kappa by its definition, for checking."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] * second[label] for label in first) / n**2
    return (observed - chance) / (1 - chance)


def choose(client, task_id, user_id, label):
    client.annotations.create(
        id=task_id,
        completed_by=user_id,
        result=[{"from_name": "verdict", "to_name": "shown", "type": "choices", "value": {"choices": [label]}}],
    )


def test_agreement_without_labels_says_what_to_do(results):
    done = curate_in_process(["eval", "agreement", str(results)])
    assert done.returncode == 2 and "curate eval review push" in done.stderr


def test_people_make_the_judges_calls_and_agreement_is_computed(label_studio, results, monkeypatch):
    data, _, _ = label_studio
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    recipe, items = judge_items(results)
    assert recipe == "multiverse" and items and {item.call for item in items} == {"quality"}
    labels = {item.item_id: item.judge_label for item in items}
    assert set(labels.values()) == {"1-2", "9-10"}  # the fake judge gives 2 or 10

    pushed = curate_in_process(["eval", "review", "push", str(results), "--data", str(data)])
    again = curate_in_process(["eval", "review", "push", str(results), "--data", str(data)])
    assert pushed.returncode == 0 and f"pushed {len(items)}, already there 0" in pushed.stdout, pushed.stderr
    assert f"pushed 0, already there {len(items)}" in again.stdout
    connection = review.connect(data)
    client = connection.client()
    project = judge_review.load_state(results).project_id
    tasks = {task.data["item_id"]: task for task in client.tasks.list(project=project, fields="all")}
    assert set(tasks) == set(labels)
    some = next(iter(tasks.values()))
    assert some.data["image"].startswith("/data/local-files/?d=")  # the judge saw the image, so do people
    assert some.data["shown"] == next(item.shown for item in items if item.item_id == some.data["item_id"])
    assert "Reference answer (a 10):" in some.data["shown"]

    alice = client.users.create(username="alice", email="alice@localhost", password="pw-alice-123456").id
    bob = client.users.create(username="bob", email="bob@localhost", password="pw-bob-1234567").id
    flipped = {"1-2": "9-10", "9-10": "1-2"}
    ordered = sorted(tasks)
    for k, item_id in enumerate(ordered):
        choose(client, tasks[item_id].id, alice, labels[item_id])
        choose(client, tasks[item_id].id, bob, flipped[labels[item_id]] if k < DISAGREE else labels[item_id])
    client.annotations.create(
        id=tasks[ordered[-1]].id,
        result=[  # off the scale: reported, not used
            {"from_name": "verdict", "to_name": "shown", "type": "choices", "value": {"choices": ["maybe"]}}
        ],
    )

    pulled = curate_in_process(["eval", "review", "pull", str(results), "--data", str(data)])
    assert pulled.returncode == 0 and f"{2 * len(items)} labels (1 off the scale, left out)" in pulled.stdout
    report = json.loads(curate_in_process(["eval", "agreement", str(results), "--json"]).stdout)
    assert report["reviewers"] == 2 and report["human_labels"] == 2 * len(items)
    # the majority ties where the two disagree: those items are left out, and the rest agree with the judge
    assert report["judge_vs_majority"]["items"] == len(items) - DISAGREE
    assert report["judge_vs_majority"]["percent_agreement"] == 100.0
    every = [(labels[item_id], labels[item_id]) for item_id in ordered]
    every += [
        (labels[item_id], flipped[labels[item_id]] if k < DISAGREE else labels[item_id])
        for k, item_id in enumerate(ordered)
    ]
    assert report["judge_vs_each_label"]["percent_agreement"] == round(100 * (1 - DISAGREE / (2 * len(items))), 2)
    assert report["judge_vs_each_label"]["cohen_kappa"] == pytest.approx(kappa(every), abs=1e-4)
    text = curate_in_process(["eval", "agreement", str(results)]).stdout
    assert "judge vs the people's majority: 100.0% agreement" in text


def test_a_label_studio_failing_is_one_line_and_exit_3_for_every_review_command(results, tmp_path, monkeypatch):
    """A Label Studio that answers 500 (here its database lost a table) to `curate review push|pull` and `curate
    eval review push|pull`: one line saying what failed and what to do, exit 3, no traceback."""
    import sqlite3

    from benchcurate.annotation import server
    from tests.helpers import run_curate
    from tests.servers import free_port

    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    data = tmp_path / "ls"
    server.up(data, free_port())
    try:
        from pathlib import Path

        from benchcurate.curation.evaluation.engine import read_results

        release = Path(read_results(results).release_folder)  # <out>/releases/<name>/<version>
        run_dir = release.parents[2] / "runs" / json.loads((release / "manifest.json").read_text())["run_id"]
        commands = [
            ["review", "push", str(run_dir)],
            ["review", "pull", str(run_dir)],
            ["eval", "review", "push", str(results)],
            ["eval", "review", "pull", str(results)],
        ]
        for command in (commands[0], commands[2]):
            assert curate_in_process([*command, "--data", str(data)]).returncode == 0
        with sqlite3.connect(data / "label_studio.sqlite3") as database:
            database.execute("ALTER TABLE project RENAME TO project_gone")
        for command in commands:
            failed = run_curate([*command, "--data", str(data)], tmp_path)
            lines = failed.stderr.strip().splitlines()
            assert failed.returncode == 3 and len(lines) == 1, failed.stderr[-2000:]
            assert "failed during the" in lines[0] and "HTTP 500 (no such table: project)" in lines[0]
            assert "rerun the same command" in lines[0] and "Traceback" not in failed.stdout + failed.stderr
    finally:
        server.down(data)
