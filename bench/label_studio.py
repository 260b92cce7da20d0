"""Label Studio round trip at 5,000 tasks: push with predictions, pull annotations; wall time and server memory.

A fresh Label Studio 1.23.2 (`annotation.server.up`, template database) on loopback.

- push, ours: `annotation.review.import_in_batches` (500 tasks per request, predictions included) of 5,000
  review tasks; naive: one import request per task, timed on 500 tasks and reported per task;
- pull, ours: `annotation.review.fetch_annotations` and `parse_round` (the paged task list with annotations, each
  checked against its sample's fields) over 5,000 annotated tasks (imported with their annotations, so setting up
  does not take an hour of single POSTs); naive: one `tasks.get` per task, timed on 500 tasks;
- server memory: resident set of the server process after each step.

    cd /work/main && .venv/bin/python bench/label_studio.py [--quick]
"""

from __future__ import annotations

import common  # first: it sets HOME etc. to a temp dir before anything else is imported

from benchcurate.annotation import server
from benchcurate.annotation.page import phase1_config, phase1_task
from benchcurate.annotation.review import BATCH, fetch_annotations, import_in_batches, parse_round
from benchcurate.curation.review.fields import CRITERIA, review_fields
from benchcurate.schemas import Turn
from tests.factories import make_sample
from tests.servers import free_port

IMAGE = "/data/local-files/?d=bench/image.png"
# Just over one import batch, so ours sends two requests; the naive way on a tenth as in the full run.
QUICK_TASKS, QUICK_NAIVE = BATCH + 20, 20
# A round of these tasks (no rewrites, drafts or checklists) gets the conversation judgement alone, as push() would
# configure it.
LABELING = phase1_config(())


def sample(index: int):
    return make_sample(
        index,
        conversation=[
            Turn(
                speaker="user" if turn % 2 == 0 else "assistant",
                utterance=f"turn {turn} of conversation {index}: " + "words about the picture " * 6,
            )
            for turn in range(8)
        ],
    )


def task(index: int, with_annotation: bool = False) -> dict:
    row = phase1_task(sample(index), IMAGE, index + 1, 5000, "bench-run")
    result = [
        {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": ["yes"]}} for name in CRITERIA
    ]
    row["predictions"] = [{"model_version": "bench-run", "score": 0.5, "result": result}]
    if with_annotation:
        row["annotations"] = [{"result": result, "completed_by": 1}]
    return row


def round_trip(client, n: int, naive_n: int, pid: int) -> dict:
    """Push and pull, ours and naive, on a fresh server (`pid`: its process, for its memory)."""
    memory = {"after start": common.tree_rss_mb(pid)}
    ours_project = client.projects.create(title="bench push ours", label_config=LABELING).id
    tasks = [task(k) for k in range(n)]
    push_seconds, _ = common.timed(
        lambda: import_in_batches(client, ours_project, tasks, lambda t: t, lambda batch, ids: None)
    )
    memory["after push"] = common.tree_rss_mb(pid)
    naive_project = client.projects.create(title="bench push naive", label_config=LABELING).id
    naive_push, _ = common.timed(
        lambda: [client.projects.import_tasks(naive_project, request=[t]) for t in tasks[:naive_n]]
    )
    annotated_project = client.projects.create(title="bench pull", label_config=LABELING).id
    setup_seconds, _ = common.timed(
        lambda: import_in_batches(
            client, annotated_project, [task(k, True) for k in range(n)], lambda t: t, lambda b, i: None
        )
    )
    fields = {sample(k).id: review_fields(sample(k)) for k in range(n)}
    pull_seconds, (submitted, _, rejected) = common.timed(
        lambda: parse_round(fetch_annotations(client, annotated_project, 1), fields)
    )
    seen = len(submitted) + len(rejected)
    memory["after pull"] = common.tree_rss_mb(pid)
    ids = [t.id for t in client.tasks.list(project=annotated_project, fields="all")][:naive_n]
    naive_pull, _ = common.timed(lambda: [client.tasks.get(task_id) for task_id in ids])
    return {
        "push_seconds": push_seconds,
        "naive_push_seconds": naive_push,
        "annotated_setup_seconds": setup_seconds,
        "pull_seconds": pull_seconds,
        "naive_pull_seconds": naive_pull,
        "annotations_seen": seen,
        "annotations_valid": len(submitted),
        "annotations_invalid": len(rejected),
        "server_rss_mb": memory,
    }


def main() -> None:
    args = common.arguments(__doc__, f"{QUICK_TASKS} tasks, naive on {QUICK_NAIVE}").parse_args()
    n, naive_n = (QUICK_TASKS, QUICK_NAIVE) if args.quick else (5000, 500)
    data = common.scratch("label-studio-") / "ls"
    info, token = server.up(data, free_port())
    try:
        from label_studio_sdk import LabelStudio

        client = LabelStudio(base_url=info.url, api_key=token or (data / "token").read_text().strip(), timeout=600)
        measured = round_trip(client, n, naive_n, info.pid)
    finally:
        server.down(data)
    per = {
        "push_ours_ms_per_task": 1000 * measured["push_seconds"] / n,
        "push_naive_ms_per_task": 1000 * measured["naive_push_seconds"] / naive_n,
        "pull_ours_ms_per_task": 1000 * measured["pull_seconds"] / n,
        "pull_naive_ms_per_task": 1000 * measured["naive_pull_seconds"] / naive_n,
    }
    data_out = {
        "benchmark": "label_studio",
        "quick": args.quick,
        "machine": common.machine(),
        "tasks": n,
        "naive_sample": naive_n,
        **measured,
        **per,
        "push_speedup": per["push_naive_ms_per_task"] / per["push_ours_ms_per_task"],
        "pull_speedup": per["pull_naive_ms_per_task"] / per["pull_ours_ms_per_task"],
    }
    text, markdown = common.table(
        ["step", "tasks", "ours s", "ours ms/task", f"naive ms/task (on {naive_n})", "ratio"],
        [
            [
                "push with predictions (500 per request vs one per request)",
                n,
                measured["push_seconds"],
                per["push_ours_ms_per_task"],
                per["push_naive_ms_per_task"],
                data_out["push_speedup"],
            ],
            [
                "pull annotations (paged list vs one GET per task)",
                n,
                measured["pull_seconds"],
                per["pull_ours_ms_per_task"],
                per["pull_naive_ms_per_task"],
                data_out["pull_speedup"],
            ],
        ],
    )
    summary = (
        "Server memory (RSS): "
        + ", ".join(f"{k} {v} MB" for k, v in measured["server_rss_mb"].items())
        + f". Pulled {measured['annotations_seen']} annotations, {measured['annotations_valid']} valid."
    )
    print(text + "\n\n" + summary)
    markdown = "\n\n".join(["# Label Studio round trip", common.machine_line(data_out["machine"]), markdown, summary])
    common.publish("label_studio", data_out, markdown, args.quick)


if __name__ == "__main__":
    main()
