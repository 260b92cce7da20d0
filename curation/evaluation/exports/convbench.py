"""A `curate eval` run on a ConvBench release, laid out the way ConvBench's own scripts read it
(`convbencheval.py`, `..._with_perfect_perception.py`, `..._with_perfect_perception_and_reasoning.py`), so they
run unchanged but for their hard-coded API key and URL.

What the scripts read (ConvBench at 309508e): from their folder `ConvBenchEval/`, the sheet `../ConvBench.xlsx`;
`./pairwise.npy`, one position per row (0: the model's conversation is Assistant A); and for row i (1-based, the
row number, not the ID column) the model's answers in `../VLMEvalKit/work_dirs/<model>/<k>/<i>.yaml`, k = 0 its
own history (first/second/third_turn_answer), 1 perception given (second/third), 2 perception and reasoning
given (third). A missing answer file is skipped and counts as a loss. Their summary reads rows 1-578 and divides
by TEST_SUM = 577 whatever the sheet holds, so the export is cut into parts of at most 577 rows, each a folder of
its own (`part-1`, ...): a part's rates are the printed ones x 577 / its rows. `rows.tsv` names the sample of
every part and row.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.spreadsheet import inert
from benchcurate.curation.evaluation.engine import folder_name, read_judgments, read_results
from benchcurate.curation.evaluation.exports import clear_for_export
from benchcurate.curation.evaluation.judging import CB_SETTINGS, cb_model_is_a
from benchcurate.curation.release.exporters import convbench_row, write_convbench_sheet
from benchcurate.curation.release.reading import open_release, rows, verified

SCRIPT_ROWS = 577  # TEST_SUM in ConvBench's scripts
SCRIPT_POSITIONS = 578  # their summary loop reads pairwise.npy up to row 578
ANSWERS = {
    "own": ("first", "second", "third"),
    "perception": ("second", "third"),
    "perception_reasoning": ("third",),
}  # what each script reads from its answer files
SUBFOLDER = {setting: str(given) for setting, given in CB_SETTINGS.items()}  # work_dirs/<model>/<0|1|2>/


def export_convbench_answers(results_folder: Path, to: Path, rows_per_part: int = SCRIPT_ROWS) -> list[Path]:
    """The parts written under `to` (refused when `to` holds anything else)."""
    results = read_results(results_folder)
    if results.protocol != "convbench":
        raise UserError(
            f"{results_folder} holds a {results.protocol} eval; `curate export convbench RESULTS` "
            f"takes the results folder of a ConvBench eval"
        )
    release = verified(open_release(Path(results.release_folder or "")))
    if release.checksums_sha256 != results.release_checksums_sha256:
        raise UserError(
            f"the release at {release.folder} is not the one {results_folder} scored (its SHA256SUMS "
            f"differs); point results.json's release_folder at the release that was scored"
        )
    answers = answers_by_sample(results_folder)
    model = folder_name(results.model)
    clear_for_export(to, {"README.md", "rows.tsv", "part-*"})
    data = list(rows(release, results.split))
    parts = [data[start : start + rows_per_part] for start in range(0, len(data), rows_per_part)]
    lines = ["part\trow\tID\tsample_id\tanswers"]
    for number, part in enumerate(parts, 1):
        lines += write_part(part, answers, to / f"part-{number}", model, number)
    (to / "rows.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (to / "README.md").write_text(readme(results.model, model, [len(part) for part in parts]), encoding="utf-8")
    return [to / f"part-{number}" for number in range(1, len(parts) + 1)]


def write_part(part: list[dict], answers: dict, folder: Path, model: str, number: int) -> list[str]:
    """One part: its sheet, images, pairwise.npy and answer files; its lines of rows.tsv."""
    import numpy as np

    sheet, positions, lines = [], [], []
    for row_number, row in enumerate(part, 1):
        image_name = write_image(row, folder / "visit_bench_images" / "images")
        turns = [turn for turn in row["conversation"] if turn["speaker"] == "user"]
        native = row.get("source_dataset") == "ConvBench" and str(row.get("source_id")).isdigit()
        ident = int(row["source_id"]) if native else row["index"]
        sheet.append(convbench_row(ident, image_name, turns, row.get("caption")))
        positions.append(0 if cb_model_is_a(row["index"], "own") else 1)
        found = write_answers(answers.get(row["index"], {}), folder / "VLMEvalKit" / "work_dirs" / model, row_number)
        lines.append(f"{number}\t{row_number}\t{inert(str(ident))}\t{row['index']}\t{','.join(found) or '-'}")
    write_convbench_sheet(sheet, folder / "ConvBench.xlsx")
    (folder / "ConvBenchEval").mkdir(parents=True, exist_ok=True)
    padded = positions + [0] * max(0, SCRIPT_POSITIONS - len(positions))
    np.save(folder / "ConvBenchEval" / "pairwise.npy", np.array(padded, dtype=np.int64))
    return lines


def answers_by_sample(results_folder: Path) -> dict[str, dict[str, dict[int, str]]]:
    """sample id -> setting -> turn -> the model's answer, from the eval's judgments."""
    found: dict[str, dict[str, dict[int, str]]] = {}
    for judgment in read_judgments(results_folder):
        if judgment.turn and judgment.answer is not None and judgment.setting in ANSWERS:
            found.setdefault(judgment.sample_id, {}).setdefault(judgment.setting, {})[judgment.turn] = judgment.answer
    return found


def write_answers(settings: dict[str, dict[int, str]], model_folder: Path, row_number: int) -> list[str]:
    """`<k>/<row>.yaml` for each setting the eval answered in full; the settings written."""
    written = []
    for setting, ordinals in ANSWERS.items():
        given = settings.get(setting, {})
        turns = {
            ordinal: given.get(turn)
            for turn, ordinal in enumerate(("first", "second", "third"), 1)
            if ordinal in ordinals
        }
        if all(answer is not None for answer in turns.values()):
            path = model_folder / SUBFOLDER[setting] / f"{row_number}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                yaml.safe_dump(
                    {f"{ordinal}_turn_answer": answer for ordinal, answer in turns.items()},
                    allow_unicode=True,
                    sort_keys=False,
                ),
                encoding="utf-8",
            )
            written.append(setting)
    return written


def write_image(row: dict, folder: Path) -> str:
    """The row's image under its content's name (one file per distinct image); the name."""
    name = f"{row['image_sha256'][:16]}{Path(row['image'].get('path') or '').suffix.lower() or '.png'}"
    if not (folder / name).exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(row["image"]["bytes"])
    return name


def readme(model: str, model_folder: str, sizes: list[int]) -> str:
    parts = "\n".join(
        f"- `part-{k}`: {size} conversations; its rates are the printed ones x 577 / {size}"
        for k, size in enumerate(sizes, 1)
    )
    return f"""# {model} on a ConvBench release, for ConvBench's own evaluation scripts

Written by `curate export convbench RESULTS`. Each part is laid out as the scripts of
https://github.com/shirlyliu64/ConvBench (`ConvBenchEval/`) read it; run them from the part's `ConvBenchEval/`:

```bash
cd part-1/ConvBenchEval
cp <your ConvBench clone>/ConvBenchEval/*.py .      # convbencheval*.py and prompts.py, unchanged
python convbencheval.py --vqa_model {model_folder}                                    # the model's own history
python convbencheval_with_perfect_perception.py --vqa_model {model_folder}            # perception given
python convbencheval_with_perfect_perception_and_reasoning.py --vqa_model {model_folder}  # both given
```

- **API key and URL.** Each script sets `OPENAI_API_KEY` to a placeholder and `OPENAI_BASE_URL` to a third-party
  service (`https://api.openai-sb.com/v1`) in its own code, overriding your environment: edit those two lines (the
  only change needed) to reach your judge.
- **Rows, not IDs.** The scripts find the answers of the sheet's row i in `../VLMEvalKit/work_dirs/<model>/<k>/<i>.yaml`
  (i counted from 1 in sheet order), whatever the ID column says; `rows.tsv` maps part and row to our sample id.
- **577.** The scripts divide their sums by a fixed 577 and read rows 1-578, so parts hold at most 577 rows:
{parts}
- `pairwise.npy` holds the order `curate eval` drew for the model's own-history setting (0: the model is
  Assistant A), padded to the 578 positions the scripts read; the scripts judge with gpt-3.5-turbo, so their
  numbers need not equal `curate eval`'s.
- A missing answer file (a turn the eval could not answer) is skipped by the scripts and counts as a loss.
"""
