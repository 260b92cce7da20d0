"""Exporters to the seed benchmarks' own released formats, so their evaluators read our samples unchanged.

- multiverse: a Hugging Face dataset folder with MultiVerse's fields exactly (index, image, character, scenario,
  goal, conversation of {speaker, utterance, checklist of {question, main_criteria, sub_criteria}}, and the
  main/sub goal, task and image categories), parquet with the images embedded;
- convbench: `ConvBench.xlsx`, sheet `multi_turn_benchmark`, with ID, image_id and the three turn instructions,
  plus the columns its evaluator reads (instruction-conditioned-caption, First/Second/Third_turn_instruction_category,
  first/second/third_turn_answer, third_turn_demands), and the images in `visit_bench_images/`. The evaluator
  stops on a missing or empty category, so a turn without one gets its capability level's name. A cell a
  spreadsheet would take for a formula (=, +, -, @) is stored as text (`curation/spreadsheet.py`);
- alignmmbench: `metadata.jsonl` with question_id, image_path, history [{user, assistant}], prompt, ref_answer,
  task and category, and the images in `images/`; as in the released file, a seed question and each of its kept
  rewrites are rows of their own (`<id>-0` the seed, `<id>-1` ... the rewrites), with the same reference.

Each output is read back by the importer of the same name (`curate import`), which the tests do. Samples that came
from that benchmark (imported) go back under their own ids and image file names, with their text as it was, so an
exported sheet matches the original cell for cell; new samples get fresh ids and their images' own names (a
content hash where two images would share one).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.extras import require
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.core.spreadsheet import append_inert
from benchcurate.schemas import Sample

ORDINALS = ("first", "second", "third")
LEVELS = ("perception", "reasoning", "creation")
CONVBENCH_HEADER = [
    "ID",
    "image_id",
    "The_first_turn_instruction",
    "The_second_turn_instruction",
    "The_third_turn_instruction",
    "instruction-conditioned-caption",
    *(f"{ordinal.capitalize()}_turn_instruction_category" for ordinal in ORDINALS),
    *(f"{ordinal}_turn_answer" for ordinal in ORDINALS),
    "third_turn_demands",
]
SUFFIXED = re.compile(r"^(.*)-(\d+)$")


def _hashed_name(sample: Sample) -> str:
    return f"{sample.images[0].sha256[:16]}{Path(sample.images[0].path).suffix.lower() or '.png'}"


def native_id(sample: Sample, source: str) -> str | None:
    """The id a sample had in `source`, when it was imported from there."""
    return sample.provenance.source_id if sample.provenance.source_dataset == source else None


def _copy_image(sample: Sample, folder: Path) -> str:
    """The image copied into `folder` under its own file name, or a content hash when that name is taken by
    another image; the name written."""
    folder.mkdir(parents=True, exist_ok=True)
    image = sample.images[0]
    for name in (Path(image.path).name, _hashed_name(sample)):
        target = folder / name
        if not target.exists():
            shutil.copyfile(image.path, target)
            return name
        if sha256_file(target) == image.sha256:
            return name
    raise UserError(f"two different images both named {_hashed_name(sample)} in {folder}")


def export_multiverse(samples: list[Sample], out: Path) -> Path:
    from datasets import Dataset, Features, Image, List, Value

    string = Value("string")
    features = Features(
        {
            "index": string,
            "image": Image(),
            "character": string,
            "scenario": string,
            "goal": string,
            "conversation": List(
                {
                    "speaker": string,
                    "utterance": string,
                    "checklist": List({"question": string, "main_criteria": string, "sub_criteria": string}),
                }
            ),
            "main_goal_category": string,
            "sub_goal_category": string,
            "main_task_category": string,
            "sub_task_category": string,
            "image_main_category": string,
            "image_sub_category": string,
        }
    )
    rows = [
        {
            "index": native_id(s, "MultiVerse") or s.id,
            "image": {"bytes": Path(s.images[0].path).read_bytes(), "path": Path(s.images[0].path).name},
            "character": s.persona.character if s.persona else None,
            "scenario": s.persona.scenario if s.persona else None,
            "goal": s.persona.goal if s.persona else None,
            "conversation": [
                {
                    "speaker": t.speaker,
                    "utterance": t.utterance,
                    "checklist": [
                        {"question": c.question, "main_criteria": c.main_criteria, "sub_criteria": c.sub_criteria}
                        for c in t.checklist
                    ],
                }
                for t in s.conversation
            ],
            "main_goal_category": s.categories.goal_main,
            "sub_goal_category": s.categories.goal_sub,
            "main_task_category": s.categories.task_main,
            "sub_task_category": s.categories.task_sub,
            "image_main_category": s.categories.image_main,
            "image_sub_category": s.categories.image_sub,
        }
        for s in samples
    ]
    (out / "data").mkdir(parents=True, exist_ok=True)
    Dataset.from_list(rows, features=features).to_parquet(str(out / "data" / "train-00000-of-00001.parquet"))
    return out


def export_convbench(samples: list[Sample], out: Path) -> Path:
    taken = [int(native) for sample in samples if (native := native_id(sample, "ConvBench")) and native.isdigit()]
    fresh = iter(range(max(taken, default=0) + 1, 10**9))  # new conversations numbered after the imported ones
    rows = []
    for sample in samples:
        turns = [turn for turn in sample.conversation if turn.speaker == "user"]
        if len(turns) != 3:
            raise UserError(
                f"sample {sample.id} has {len(turns)} user turns; ConvBench needs exactly 3 (use the convbench recipe)"
            )
        native = native_id(sample, "ConvBench")
        rows.append(
            convbench_row(
                int(native) if native and native.isdigit() else native or next(fresh),
                _copy_image(sample, out / "visit_bench_images"),
                turns,
                sample.caption,
            )
        )
    return write_convbench_sheet(rows, out / "ConvBench.xlsx")


def convbench_row(ident: int | str, image_name: str, turns: list, caption: str | None) -> list:
    """One row of ConvBench's sheet from the three user turns (Turn models or a release's turn dicts)."""

    def field(turn, name: str):
        return turn.get(name) if isinstance(turn, dict) else getattr(turn, name)

    focus = "\n".join(f"{k}. {point}" for k, point in enumerate(field(turns[2], "focus_points") or [], 1))
    return [
        ident,
        image_name,
        *(field(turn, "utterance") for turn in turns),
        caption,
        *(field(turn, "task_category") or level.capitalize() for turn, level in zip(turns, LEVELS)),
        *(field(turn, "reference") for turn in turns),
        focus or None,
    ]


def write_convbench_sheet(rows: list[list], path: Path) -> Path:
    """ConvBench.xlsx, sheet `multi_turn_benchmark`: the header, then the rows, every text inert."""
    require("xlsx", "writing ConvBench's spreadsheet")
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "multi_turn_benchmark"
    for row in [CONVBENCH_HEADER, *rows]:
        append_inert(sheet, row)
    path.parent.mkdir(parents=True, exist_ok=True)
    book.save(path)
    return path


def export_alignmmbench(samples: list[Sample], out: Path) -> Path:
    taken = {native for sample in samples if (native := native_id(sample, "AlignMMBench"))}
    lines = []
    for sample in samples:
        pairs = [
            {"user": sample.history[k].utterance, "assistant": sample.history[k + 1].utterance}
            for k in range(0, len(sample.history) - 1, 2)
        ]
        question = next(turn for turn in sample.conversation if turn.speaker == "user")
        rewrites = [rewrite.text for rewrite in sample.rewrites if rewrite.status == "kept"]
        common = {
            "image_path": f"images/{_copy_image(sample, out / 'images')}",
            "history": pairs,
            "ref_answer": question.reference,
            "task": sample.categories.task_sub or question.task_category,
            "category": sample.categories.task_main,
        }
        ids = _question_ids(native_id(sample, "AlignMMBench"), sample.id, len(rewrites), taken)
        for question_id, prompt in zip(ids, [question.utterance, *rewrites], strict=True):
            lines.append(
                {
                    "question_id": question_id,
                    "image_path": common["image_path"],
                    "history": pairs,
                    "prompt": prompt,
                    **{key: common[key] for key in ("ref_answer", "task", "category")},
                }
            )
    out.mkdir(parents=True, exist_ok=True)
    path = out / "metadata.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def _question_ids(native: str | None, sample_id: str, rewrites: int, taken: set[str]) -> list[str]:
    """The seed's id (its own when imported, else `<sample id>-0`) and one free `<base>-<k>` per rewrite."""
    found = SUFFIXED.match(native) if native else None
    base, k = (found.group(1), int(found.group(2))) if found else (native or sample_id, 0)
    ids = [native or f"{base}-0"]
    while len(ids) <= rewrites:
        k += 1
        if f"{base}-{k}" not in taken:
            ids.append(f"{base}-{k}")
    taken.update(ids)
    return ids


EXPORTERS = {"multiverse": export_multiverse, "convbench": export_convbench, "alignmmbench": export_alignmmbench}
