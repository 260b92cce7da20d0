"""A review round as a team of two does it, in a real Label Studio through its own pages in headless Chromium.

Two people made with `curate ls user add` log in through the login page and work through Label Studio's queue
("Label All Tasks") on a run of 12 samples (ConvBench drafts plus MultiVerse-style checklists) with planted
disagreements and edits; an adjudicator settles what they left open through the adjudication page. Checked: each
task got exactly two annotations from two people through the queue, and nobody saw the other's answers; the
release holds each fix exactly as typed; majority, percent agreement and Fleiss' kappa equal a computation from
the raw annotations; a re-pull changes nothing; a re-push adds no task.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from benchcurate.annotation import review, server
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.schemas import ChecklistItem, ImageRef, Provenance, Sample, Turn
from tests.factories import make_image
from tests.helpers import curate_in_process, resolve

pytestmark = pytest.mark.slow
SAMPLES = 12
SHOT_DIR = Path(__file__).resolve().parents[1] / "output"
# what the two reviewers type, exactly: numbers first, unicode, a newline
FIX = "3 faces appear on the left; 2024 figures below.\nCafé – naïve – 中文 stay as typed"
CAPTION = "2 cats on a red mat\n1 dog behind them"
FOCUS = {"ann": "1. names the 3 windows\n2024 is on the sign", "bo": "- keeps it under 50 words\n- uses the caption"}
ADDED = "Does the answer say how many windows there are? | Factual Correctness | counting"


def team_run(tmp_path: Path) -> Path:
    """12 samples with a three-level instruction ladder and two checklist items per turn, as canonical samples;
    the ConvBench recipe drafts their caption, references and focus points; review in human mode."""
    rows = []
    for seed in range(SAMPLES):
        path = make_image(tmp_path / "images" / f"{seed}.png", seed)
        turns = [
            Turn(
                speaker="user",
                level=level,
                utterance=f"Sample {seed}: {question}",
                checklist=[
                    ChecklistItem(
                        question=f"Does the answer {aspect}?", main_criteria="Factual Correctness", sub_criteria=aspect
                    )
                    for aspect in (f"name what the {level} asks", f"stay on sample {seed}")
                ],
            )
            for level, question in (
                ("perception", "what is in the picture?"),
                ("reasoning", "why is it laid out so?"),
                ("creation", "write a short caption for it."),
            )
        ]
        sample = Sample(
            id=f"team{seed:02d}",
            images=[ImageRef(path=str(path), sha256=sha256_file(path), size_bytes=path.stat().st_size, format="PNG")],
            provenance=Provenance(source_dataset="team", source_id=f"{seed}.png", license="CC0-1.0"),
            conversation=turns,
        )
        rows.append(sample.model_dump_json())
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(rows) + "\n", encoding="utf-8")
    config = resolve(
        "convbench",
        tmp_path / "out",
        input_path=str(samples),
        run_id="team",
        overrides={
            "conversation_review": {"mode": "human", "reviewers": 2},
            "image_near_dedup": {"max_hamming_distance": 0},
        },
    )
    store = RunStore(tmp_path / "out" / "runs" / "team")
    store.save_config(config)
    run_all(store.root)
    return store.root


def plans(ids: list[str]) -> dict[str, dict[str, dict]]:
    """What each reviewer does per sample. s0: ann fixes a reference, bo submits the draft; s1: both delete one
    checklist item; s2: only ann deletes one (a tie); s3: a tie on "correct"; s4: both say the image is not needed
    (rejected); s5: two different edits of the focus points; s6: bo fixes the caption; s7: ann adds an item."""
    s = ids
    ann = {sample: {"answers": {"natural": "yes", "correct": "yes", "needs_image": "yes"}} for sample in s}
    bo = json.loads(json.dumps(ann))
    ann[s[0]]["edits"] = {"reference_1": FIX}
    ann[s[1]]["deletes"], bo[s[1]]["deletes"] = [[0, 1]], [[0, 1]]
    ann[s[2]]["deletes"] = [[1, 0]]
    bo[s[3]]["answers"]["correct"] = "no"
    ann[s[4]]["answers"]["needs_image"] = bo[s[4]]["answers"]["needs_image"] = "no"
    ann[s[5]]["edits"], bo[s[5]]["edits"] = {"focus_2": FOCUS["ann"]}, {"focus_2": FOCUS["bo"]}
    bo[s[6]]["edits"] = {"caption": CAPTION}
    ann[s[7]]["adds"] = {"0": ADDED}
    return {"ann": ann, "bo": bo}


def browse(label_studio_url: str, plans_by_name: dict[str, dict], work: Path) -> dict[str, dict]:
    """Each person's browser at once (a team works side by side); what each saw."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    playwright = server.REPO / ".ls" / "pw" / "node_modules" / "playwright-core"
    assert chromium and playwright.exists(), "run `make test` (it installs Chromium and playwright-core)"
    running = {}
    for name, plan in plans_by_name.items():
        home = work / f"chrome-{name}"
        env = {
            **os.environ,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "CHROMIUM_PATH": chromium,
            "PLAYWRIGHT_CORE": str(playwright),
        }
        (work / f"{name}.plan.json").write_text(
            json.dumps({**plan, "failure_shot": str(work / f"{name}.png")}), encoding="utf-8"
        )
        running[name] = subprocess.Popen(
            [
                "node",
                str(Path(__file__).with_name("review_round.js")),
                label_studio_url,
                str(work / f"{name}.plan.json"),
                str(work / f"{name}.out.json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    found = {}
    for name, process in running.items():
        _, stderr = process.communicate(timeout=300)
        out = work / f"{name}.out.json"
        found[name] = json.loads(out.read_text()) if out.exists() else {}
        assert process.returncode == 0, (name, stderr[-3000:], found[name])
    return found


def fleiss(items: list[list[str]]) -> float | None:
    """Fleiss' kappa by its definition, for checking (None when chance agreement is 1)."""
    rated = [values for values in items if len(values) >= 2]
    total = sum(len(values) for values in rated)
    shares = Counter(value for values in rated for value in values)
    expected = sum((count / total) ** 2 for count in shares.values())
    observed = sum((sum(c * c for c in Counter(v).values()) - len(v)) / (len(v) * (len(v) - 1)) for v in rated)
    return None if expected == 1 else (observed / len(rated) - expected) / (1 - expected)


def test_two_people_and_an_adjudicator_review_a_round_through_label_studios_pages(tmp_path, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    monkeypatch.delenv("CURATE_REVIEWER_PASSWORD", raising=False)
    from tests.servers import free_port

    data = tmp_path / "ls"
    info, _ = server.up(data, free_port())
    try:
        _round_of_two(tmp_path, data, info.url)
    finally:
        server.down(data)


def _round_of_two(tmp_path: Path, data: Path, url: str) -> None:
    run_dir = team_run(tmp_path)
    passwords = {}
    for name, role in (("ann", "annotator"), ("bo", "annotator"), ("cy", "adjudicator")):
        added = curate_in_process(["ls", "user", "add", f"{name}@example.org", "--role", role, "--data", str(data)])
        assert added.returncode == 0, added.stderr
        passwords[name] = added.stdout.rsplit(": ", 1)[1].strip()
    pushed = curate_in_process(["review", "push", str(run_dir), "--data", str(data)])
    assert pushed.returncode == 0 and f"pushed {SAMPLES}, already there 0" in pushed.stdout, pushed.stderr
    state = review.load_state(run_dir)
    ids = sorted(state.pushed, key=state.pushed.get)  # push order: the queue's order for the first reviewer
    todo = plans(ids)
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    shots = {"ann": {ids[0]: str(SHOT_DIR / "review_page.png")}, "bo": {}}
    secrets = {
        "ann": [CAPTION.splitlines()[0], FOCUS["bo"].splitlines()[0]],
        "bo": [FIX.splitlines()[0], FOCUS["ann"].splitlines()[0]],
    }
    seen = browse(
        url,
        {
            name: {
                "email": f"{name}@example.org",
                "password": passwords[name],
                "phase": 1,
                "project": state.project_id,
                "tasks": todo[name],
                "secrets": secrets[name],
                "shots": shots[name],
            }
            for name in ("ann", "bo")
        },
        tmp_path,
    )
    for name, found in seen.items():  # each got every task once, and never saw the other's answers
        assert sorted(found["seen"]) == sorted(ids) and found["secrets_seen"] == [], (name, found)
        assert found["tallest_group"] <= found["visible"], found  # each turn's box fits a 1366x768 screen at once
    # a third person's queue is empty: every task has its two reviewers
    import httpx

    with httpx.Client(base_url=url) as browser:
        browser.get("/user/login/")
        browser.post(
            "/user/login/",
            data={
                "email": "cy@example.org",
                "password": passwords["cy"],
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            },
            headers={"Referer": f"{url}/user/login/"},
        )
        assert browser.get(f"/api/projects/{state.project_id}/next").status_code == 404

    pulled = curate_in_process(["review", "pull", str(run_dir), "--data", str(data)])
    assert pulled.returncode == 0, pulled.stderr
    assert f"annotations {2 * SAMPLES}: counted {2 * SAMPLES}, not counted 0" in pulled.stdout
    rows = [json.loads(line) for line in (run_dir / "review" / "annotations.jsonl").read_text().splitlines()]
    per_task = defaultdict(list)
    for row in rows:
        per_task[row["task_id"]].append(row["completed_by"])
    assert sorted(per_task) == sorted(state.pushed.values())
    assert all(len(people) == 2 and len(set(people)) == 2 for people in per_task.values())
    from benchcurate.curation.review.conversation_review import read_record

    record = read_record(run_dir)
    for kind in ("natural", "correct", "needs_image"):  # by hand from the raw annotations
        given = defaultdict(list)
        for row in rows:
            given[row["sample_id"]] += [r["value"]["choices"][0] for r in row["result"] if r["from_name"] == kind]
        pairs = sum(len(v) * (len(v) - 1) // 2 for v in given.values())
        agree = sum(sum(c * (c - 1) // 2 for c in Counter(v).values()) for v in given.values())
        assert record.agreement[kind].percent == pytest.approx(agree / pairs)
        kappa = fleiss(list(given.values()))
        assert record.agreement[kind].fleiss_kappa == (None if kappa is None else pytest.approx(kappa))
        for sample_id, values in given.items():
            top = Counter(values).most_common()
            majority = None if len(top) > 1 and top[0][1] == top[1][1] else top[0][0]
            assert record.samples[sample_id].questions[kind].majority == majority
    assert record.agreement["natural"].kappa_undefined == "undefined: every answer was 'yes'"
    s = ids
    assert [record.samples[i].status for i in s[:8]] == [
        "accepted",
        "accepted",
        "pending",
        "pending",
        "rejected",
        "pending",
        "accepted",
        "accepted",
    ]
    assert record.samples[s[2]].questions["check_1_0"].by == "open"
    assert record.samples[s[5]].texts["focus_2"].by == "open"

    again = curate_in_process(["review", "push", str(run_dir), "--data", str(data)])
    assert f"pushed 0, already there {SAMPLES}" in again.stdout  # a re-push adds no task
    phase2 = curate_in_process(["review", "push", str(run_dir), "--phase", "2", "--data", str(data)])
    assert "pushed 3, already there 0" in phase2.stdout, phase2.stdout + phase2.stderr
    state = review.load_state(run_dir)
    settle = {
        s[2]: {"choose": {"0": "delete ("}},
        s[3]: {"choose": {"0": "yes ("}},
        s[5]: {"choose": {"0": f"Version {sorted(FOCUS.values()).index(FOCUS['bo']) + 1}"}},
    }
    adjudicated = browse(
        url,
        {
            "cy": {
                "email": "cy@example.org",
                "password": passwords["cy"],
                "phase": 2,
                "project": state.phase2_project_id,
                "tasks": settle,
                "shots": {s[5]: str(SHOT_DIR / "review_adjudication.png")},
            }
        },
        tmp_path,
    )["cy"]
    assert sorted(adjudicated["seen"]) == sorted(settle)
    pulled = curate_in_process(["review", "pull", str(run_dir), "--data", str(data)])
    assert "pending 0" in pulled.stdout, pulled.stdout
    record = read_record(run_dir)
    before = (run_dir / "review" / "record.json").read_bytes()
    curate_in_process(["review", "pull", str(run_dir), "--data", str(data)])
    assert (run_dir / "review" / "record.json").read_bytes() == before  # a re-pull changes nothing
    status = curate_in_process(["review", "status", str(run_dir)]).stdout
    assert "cy@example.org" in status and "3 adjudicated" in status

    run_all(run_dir)
    from benchcurate.curation.release.writer import write_release

    release = write_release(run_dir, tmp_path / "out")
    import pyarrow.parquet as pq

    rows = {row["index"]: row for row in pq.read_table(release / "data").to_pylist()}
    assert s[4] not in rows and len(rows) == SAMPLES - 1
    assert rows[s[0]]["conversation"][1]["reference"] == FIX  # the fix, exactly as typed
    assert rows[s[6]]["caption"] == CAPTION
    assert rows[s[5]]["conversation"][2]["focus_points"] == ["keeps it under 50 words", "uses the caption"]
    assert all(len(row["review_reviewers"]) >= 2 for row in rows.values())
    # ConvBench's release has no checklist column: the run's final items hold them
    final = {row["id"]: row for row in map(json.loads, RunStore(run_dir).last_kept_path().read_text().splitlines())}
    assert [item["question"] for item in final[s[1]]["conversation"][0]["checklist"]] == [
        "Does the answer name what the perception asks?"
    ]  # both deleted item 2
    assert len(final[s[2]]["conversation"][1]["checklist"]) == 1  # the adjudicator deleted it
    assert final[s[7]]["conversation"][0]["checklist"][-1]["question"] == ADDED.split(" | ")[0]
