"""An exported lmms-eval task run by lmms-eval 0.7.3 itself (its own venv, `make lmms-eval`), with its OpenAI-compatible
model and the task's judge both pointed at the loopback server: one lmms-eval command over the four recipes'
tasks, its results file read back and checked against what the planted share implies; then its logged samples
scored again by `curate eval --predictions`, which must find the same headline."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from benchcurate.curation.evaluation.engine import evaluate
from benchcurate.curation.evaluation.exports.lmms_eval import AGGREGATIONS, export_lmms_eval
from benchcurate.curation.evaluation.judging import flattened_question, turn_items
from benchcurate.curation.release.reading import open_release, rows
from benchcurate.curation.release.writer import write_release
from benchcurate.schemas.evaluation import EvalOptions
from tests.fakes.judges import marked, marker_world, model_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import REPO, SMALL, finished_run

pytestmark = pytest.mark.slow
LMMS_PYTHON = REPO / ".ls" / "lmms-eval" / "bin" / "python"
SHARE = 0.5
LIMIT = 2  # samples


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("lmms")
    made = {}
    for recipe in ("multiverse", "convbench", "probench", "alignmmbench"):
        run_dir = finished_run(
            tmp_path / recipe, recipe, recipe, images=6, overrides=SMALL if recipe == "multiverse" else {}
        )
        release = write_release(run_dir, tmp_path / recipe / "out")
        made[recipe] = (release, export_lmms_eval(release, tmp_path / "tasks"))
    return tmp_path, made


def first_rows(release, count):
    return list(rows(open_release(release), "test", count))


def prompts(recipe: str, row: dict) -> list[str]:
    """The model's round prompts as the task writes them: the gold history (multiverse, alignmmbench) or the
    model's own earlier answers (convbench, probench), which the loopback model writes deterministically."""
    items, answers, found = turn_items(row, recipe), [], []
    for k, item in enumerate(items):
        if recipe in ("convbench", "probench"):
            history = [
                pair
                for earlier, answer in zip(items[:k], answers)
                for pair in (("user", earlier.question), ("assistant", answer))
            ]
        else:
            history = list(item.history)
        prompt = flattened_question(history, item.question)
        found.append(prompt)
        answers.append(model_reply({"messages": [{"content": prompt}]}, SHARE))
    return found


def expected(recipe: str, data: list[dict]) -> dict[str, float]:
    """The headline each task must report when the judge prefers marked answers."""
    flags = [[marked(prompt, SHARE) for prompt in prompts(recipe, row)] for row in data]
    every = [flag for found in flags for flag in found]
    if recipe == "multiverse":
        return {"score": 100 * sum(every) / len(every)}
    if recipe == "alignmmbench":  # Table 3's Avg: the mean of the task means
        tasks: dict[str, list[int]] = {}
        for row, found in zip(data, flags):
            task = turn_items(row, recipe)[0].extra["task"] or "unlabelled"
            tasks.setdefault(task, []).extend(10 if flag else 2 for flag in found)
        return {"rating": sum(sum(r) / len(r) for r in tasks.values()) / len(tasks)}
    if recipe == "probench":  # the judge reads the whole conversation: any marked answer wins it
        return {"win_rate": 100 * sum(any(found) for found in flags) / len(flags)}
    return {"S1": 100 * sum(found[0] for found in flags) / len(flags)}


@pytest.mark.skipif(not LMMS_PYTHON.exists(), reason="no lmms-eval venv at .ls/lmms-eval (make lmms-eval)")
def test_lmms_eval_runs_the_exported_tasks_and_scores_them_like_curate_eval(tasks):
    tmp_path, made = tasks
    home = tmp_path / "home"
    home.mkdir()
    with FakeOpenAIServer(responder=marker_world({"fake-vlm-mini": SHARE}, judge="fake-vlm")) as server:
        env = {
            **os.environ,
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / "cache"),
            "HF_HOME": str(home / "hf"),
            "TMPDIR": str(home),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OPENAI_API_KEY": "sk-loopback",
            "OPENAI_API_BASE": server.base_url,
            "BENCHCURATE_JUDGE_BASE_URL": server.base_url,
            "BENCHCURATE_JUDGE_MODEL": "fake-vlm",
        }
        names = ",".join(task.name for _, task in made.values())
        done = subprocess.run(
            [
                str(LMMS_PYTHON),
                "-m",
                "lmms_eval",
                "--model",
                "openai",
                "--model_args",
                "model_version=fake-vlm-mini",
                "--tasks",
                names,
                "--include_path",
                str(tmp_path / "tasks"),
                "--limit",
                str(LIMIT),
                "--output_path",
                str(tmp_path / "results"),
                "--log_samples",
                "--timezone",
                "UTC",
                "--verbosity",
                "DEBUG",
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        rescored = {}
        for recipe, (release, task) in made.items():  # the same answers, judged by curate eval
            log = next((tmp_path / "results").rglob(f"*_samples_{task.name}.jsonl"))
            rescored[recipe] = json.loads(
                (
                    evaluate(
                        EvalOptions(
                            release=str(release),
                            candidate={"model": "fake-vlm-mini"},
                            predictions=str(log),
                            judge={"model": "fake-vlm", "base_url": server.base_url},
                            out=str(tmp_path / "evals"),
                        )
                    )
                    / "results.json"
                ).read_text()
            )
    assert done.returncode == 0, done.stderr[-4000:]
    (results_file,) = (tmp_path / "results").rglob("*_results.json")
    results = json.loads(results_file.read_text())
    for recipe, (release, task) in made.items():
        reported = results["results"][task.name]
        assert reported["failures,none"] == 0, recipe
        assert results["n-samples"][task.name]["effective"] == LIMIT  # --limit counted samples
        for metric, value in expected(recipe, first_rows(release, LIMIT)).items():
            assert reported[f"{metric},none"] == pytest.approx(value, abs=1e-3), (recipe, metric, reported)
        log = next(results_file.parent.glob(f"*_samples_{task.name}.jsonl"))
        indexes = [json.loads(line)["failures"]["index"] for line in log.read_text().splitlines()]
        assert indexes == [row["index"] for row in first_rows(release, LIMIT)], recipe
        headline = next(iter(AGGREGATIONS[recipe]))
        assert rescored[recipe]["score"] == pytest.approx(reported[f"{headline},none"], abs=1e-2), recipe
        assert rescored[recipe]["predictions"]["harness"] == "lmms-eval" and rescored[recipe]["failures"] == {}
