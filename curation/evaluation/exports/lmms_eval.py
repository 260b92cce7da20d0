"""A release as an lmms-eval task folder: `lmms-eval --tasks <name> --include_path <folder>` (0.7.x) runs it on
the release's own parquet and scores it the way the release's paper did, with the judge reached over the OpenAI
protocol (see the folder's README.md). The folder holds:

- `<name>.yaml`: the task: local parquet, one document per sample, `generate_until_agentic` rounds (one per
  question: lmms-eval's OpenAI-compatible model has no multi-round chat), the recipe's metrics;
- `utils.py` (`lmms_eval_utils.py` of this package, copied), `benchcurate_judging.py` (`judging.py`, copied: the
  same prompts' replies read the same way as `curate eval`), `task.json` (recipe, judge prompts, release identity);
- `data/`: the release split's parquet files, copied.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.evaluation import judging
from benchcurate.curation.evaluation.engine import PROMPT_VERSION, protocol_for
from benchcurate.curation.evaluation.exports import clear_for_export
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.curation.release.reading import open_release, rows, split_files, verified

HERE = Path(__file__).resolve().parent
# metric -> the aggregation function in utils.py, per recipe; the first is the paper's headline
AGGREGATIONS = {
    "multiverse": {
        "score": "mv_score",
        "checklist_completion": "mv_checklist_completion",
        "quality": "mv_quality",
        "per_turn": "mv_per_turn",
    },
    "convbench": {"R1": "cb_r1", "R2": "cb_r2", "S1": "cb_s1", "S2": "cb_s2", "S3": "cb_s3", "S0": "cb_s0"},
    "probench": {"bradley_terry": "pb_bradley_terry", "win_rate": "pb_win_rate", "elo_online": "pb_elo_online"},
    "alignmmbench": {
        "rating": "amb_rating",
        "per_question_mean": "amb_per_question_mean",
        "per_task": "amb_per_task",
        "rewrite_spread_ours": "amb_rewrite_spread_ours",
    },
}
FAILURES = {"failures": "failures", "failure_reasons": "failure_reasons"}  # every task's, after the recipe's
LOWER_IS_BETTER = {"failures", "failure_reasons", "rewrite_spread_ours"}
HISTORY = {
    "multiverse": "the gold conversation before each turn (MultiVerse's Oracle setting)",
    "convbench": "the model's own earlier answers (ConvBench's setting (i); the gold-history settings (ii) "
    "and (iii) and the nine scores need `curate eval`)",
    "probench": "the model's own earlier answers; the judge compares the conversation with the release's "
    "baseline answers in both orders",
    "alignmmbench": "the sample's given dialogue history, before the seed question and before each kept rewrite",
}


@dataclass(frozen=True)
class ExportedTask:
    name: str
    folder: Path


def task_name(release_name: str, version: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", f"{release_name}_v{version}".lower()).strip("_")


def export_lmms_eval(release_folder: Path, to: Path, split: str = "test") -> ExportedTask:
    release = verified(open_release(release_folder))
    protocol = protocol_for(release)
    name = task_name(release.name, release.version)
    folder = to / name
    parquet = split_files(release, split)
    rounds = max((len(judging.turn_items(row, release.recipe)) for row in rows(release, split)), default=1)
    clear_for_export(
        folder, {"data", "utils.py", "benchcurate_judging.py", "task.json", f"{name}.yaml", "README.md", "__pycache__"}
    )
    (folder / "data").mkdir(parents=True)
    for path in parquet:
        shutil.copyfile(path, folder / "data" / path.name)
    shutil.copyfile(HERE / "lmms_eval_utils.py", folder / "utils.py")
    shutil.copyfile(HERE.parent / "judging.py", folder / "benchcurate_judging.py")
    prompts = {prompt_id: load_prompt(prompt_id, PROMPT_VERSION) for prompt_id in protocol.prompts}
    task = {
        "recipe": release.recipe,
        "release": release.name,
        "version": release.version,
        "split": split,
        "release_checksums_sha256": release.checksums_sha256,
        "history": HISTORY[release.recipe],
        "prompts": {
            prompt_id: {
                "version": prompt.version,
                "sha256": prompt.sha256,
                "system": prompt.system,
                "user": prompt.user,
                "parts": prompt.parts,
            }
            for prompt_id, prompt in prompts.items()
        },
    }
    (folder / "task.json").write_text(json.dumps(task, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / f"{name}.yaml").write_text(
        task_yaml(name, release.recipe, split, rounds, folder.resolve() / "data"), encoding="utf-8"
    )
    (folder / "README.md").write_text(readme(name, release, folder), encoding="utf-8")
    return ExportedTask(name, folder)


def task_yaml(name: str, recipe: str, split: str, rounds: int, data: Path) -> str:
    """The task; its data path is absolute (lmms-eval hands data_files to `datasets`, which reads them from the
    working directory): export again after moving the folder."""
    metrics = "".join(
        f"  - metric: {metric}\n    aggregation: !function utils.{function}\n"
        f"    higher_is_better: {'false' if metric in LOWER_IS_BETTER else 'true'}\n"
        for metric, function in {**AGGREGATIONS[recipe], **FAILURES}.items()
    )
    return (
        f"# A benchcurate {recipe} release as an lmms-eval task (written by `curate export lmms-eval`).\n"
        f"# One document per sample (--limit counts samples); one agentic round per question.\n"
        f"task: {name}\n"
        f"dataset_path: parquet\n"
        f"dataset_kwargs:\n  data_files:\n    {split}: {json.dumps(str(data / f'{split}-*.parquet'))}\n"
        f"test_split: {split}\n"
        f"output_type: generate_until_agentic\n"
        f"doc_to_visual: !function utils.doc_to_visual\n"
        f"doc_to_text: !function utils.doc_to_text\n"
        f"doc_to_target: !function utils.doc_to_target\n"
        f"process_results: !function utils.process_results\n"
        f"process_results_use_image: true\n"
        f"metric_list:\n{metrics}"
        f"generation_kwargs:\n  max_new_tokens: 1024\n  temperature: 0\n  max_agentic_steps: {rounds + 1}\n"
        f"metadata:\n  version: 1\n"
    )


def readme(name: str, release, folder: Path) -> str:
    headline = next(iter(AGGREGATIONS[release.recipe]))
    return f"""# {name}: {release.name} {release.version} as an lmms-eval task

Written by `curate export lmms-eval`; scores the {release.recipe} release the way its paper did, with the same judge
prompts and the same reading of the judge's replies as `curate eval` (`benchcurate_judging.py`).

```bash
export OPENAI_API_KEY=...                    # the model under test's server (lmms-eval's openai model)
export OPENAI_API_BASE=http://127.0.0.1:8000/v1
export BENCHCURATE_JUDGE_BASE_URL=https://api.openai.com/v1 BENCHCURATE_JUDGE_MODEL=gpt-4o-2024-11-20
export BENCHCURATE_JUDGE_API_KEY=...         # else OPENAI_API_KEY
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python -m lmms_eval --model openai --model_args model_version=<model> --tasks {name} \\
    --include_path {folder} --output_path results/ --log_samples --limit 10
```

- **History.** lmms-eval's OpenAI-compatible model has no multi-round chat (its `generate_until_multi_round` raises
  and the run still exits 0), so each sample is one document run as `generate_until_agentic` rounds, one per
  question, each a single user message with the image and the earlier turns written out: {HISTORY[release.recipe]}.
- **--limit counts samples**, not turns or questions.
- The YAML names its data by absolute path: export again after moving this folder.
- **The result**: `results/<model>/<time>_results.json`, at `results["{name}"]["{headline},none"]` (the paper's
  headline), beside the other metrics; `failures` counts judged turns that have no score (an unreadable judge reply,
  asked twice; a failed model request; a judge left unconfigured), which never count as zeros, and
  `failure_reasons` says why, per kind, with one message each. Metrics marked `_ours` are not the paper's.
- **Check the results file**, not the exit code: lmms-eval exits 0 when a task fails (a missing key, an unreachable
  server). `--verbosity DEBUG` makes such failures exit 1.
- **The whole protocol on the same answers**: `--log_samples` keeps each sample's answers, and
  `curate eval <release> --model <name> --judge-model <judge> --predictions results/<model>/<time>_samples_{name}.jsonl`
  judges them with the paper's full protocol (intervals, breakdowns, the leaderboard).
- Keys go in environment variables, never in `--model_args` (lmms-eval writes those into the results file).
"""
