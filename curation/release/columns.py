"""The release's columns, per recipe: native nested types (lists of structs), and only the columns the recipe fills.

One table, `COLUMNS`, declares every column once: its Hugging Face feature, what it holds and which evaluator field
it feeds. `features(recipe)` is a release's schema, `to_row(sample, recipe)` one row of it, and
docs/release-schema.md is generated from the same table (`release_schema_markdown`; a test keeps the file in step).
A multiverse release carries MultiVerse's Hugging Face fields exactly, then provenance, review and producer
columns; the other recipes carry their papers' fields in place of MultiVerse's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datasets import Features, Image, List, Value

from benchcurate.schemas import Sample, Turn

STRING = Value("string")
CHECKLIST = List({"question": STRING, "main_criteria": STRING, "sub_criteria": STRING})
SCHEMA_DOC = "docs/release-schema.md"


@dataclass(frozen=True)
class Column:
    name: str
    feature: object
    value: Callable[[Sample], object]
    meaning: str
    feeds: str = "-"


def _turns(fields: tuple[str, ...]) -> Callable[[Sample], list[dict]]:
    return lambda sample: [_turn(turn, fields) for turn in sample.conversation]


def _turn(turn: Turn, fields: tuple[str, ...]) -> dict:
    row = {"speaker": turn.speaker, "utterance": turn.utterance}
    if "checklist" in fields:
        row["checklist"] = [
            {"question": item.question, "main_criteria": item.main_criteria, "sub_criteria": item.sub_criteria}
            for item in turn.checklist
        ]
    for name in ("level", "task_category", "reference"):
        if name in fields:
            row[name] = getattr(turn, name)
    if "focus_points" in fields:
        row["focus_points"] = list(turn.focus_points)
    return row


TURN_FEATURES = {
    "speaker": STRING,
    "utterance": STRING,
    "checklist": CHECKLIST,
    "level": STRING,
    "task_category": STRING,
    "reference": STRING,
    "focus_points": List(STRING),
}


def _conversation(fields: tuple[str, ...], meaning: str, feeds: str) -> Column:
    wanted = ("speaker", "utterance", *fields)
    return Column("conversation", List({name: TURN_FEATURES[name] for name in wanted}), _turns(wanted), meaning, feeds)


def _image(sample: Sample) -> dict:
    return {"bytes": Path(sample.images[0].path).read_bytes(), "path": Path(sample.images[0].path).name}


def _persona(field: str) -> Callable[[Sample], str | None]:
    return lambda sample: getattr(sample.persona, field) if sample.persona else None


def _category(field: str) -> Callable[[Sample], str | None]:
    return lambda sample: getattr(sample.categories, field)


def _generated_by(sample: Sample) -> list[dict]:
    return [
        {"field": name, **generation.model_dump(mode="json")}
        for name, generation in sorted(sample.generated_by.items())
    ]


HEAD = [
    Column(
        "index",
        STRING,
        lambda s: s.id,
        "the sample's id, stable across runs and versions",
        "the sample id in every result file",
    ),
    Column(
        "image",
        Image(),
        _image,
        "the image, embedded (bytes and its file name)",
        "the image sent to the model under test (and to a vision judge)",
    ),
]

TAIL = [
    Column("source_dataset", STRING, lambda s: s.provenance.source_dataset, "where the image came from"),
    Column(
        "source_id",
        STRING,
        lambda s: s.provenance.source_id,
        "its id there (the seed benchmark's own id when imported)",
        "the exporters (original ids)",
    ),
    Column(
        "image_license",
        STRING,
        lambda s: s.provenance.license,
        "the picture's license: SPDX id, 'Public-Domain' or 'unknown'",
    ),
    Column(
        "text_license",
        STRING,
        lambda s: s.provenance.text_license,
        "the license of the sample's text (questions, answers, annotations): SPDX id or 'unknown'",
    ),
    Column("attribution", STRING, lambda s: s.provenance.attribution, "credit line required by the license"),
    Column("image_sha256", STRING, lambda s: s.images[0].sha256, "sha256 of the image bytes"),
    Column("image_phash", STRING, lambda s: s.images[0].phash, "64-bit perceptual hash, 16 hex digits"),
    Column(
        "review_status",
        STRING,
        lambda s: s.review.status,
        "accepted (released samples)",
        "`curate eval agreement` (human labels)",
    ),
    Column("review_mode", STRING, lambda s: s.review.mode, "human (Label Studio) or auto (nobody looked)"),
    Column(
        "review_reviewers",
        List(STRING),
        lambda s: s.review.reviewers,
        "who reviewed: pseudonymous Label Studio user ids (label-studio-user-N), adjudicators last; empty in auto mode",
    ),
    Column(
        "generated_by",
        List(
            {
                "field": STRING,
                "backend": STRING,
                "model": STRING,
                "prompt_id": STRING,
                "prompt_version": Value("int64"),
                "prompt_sha256": STRING,
            }
        ),
        _generated_by,
        "who produced each generated field: backend ('offline-heuristic' or 'openai'), model, "
        "prompt id, version and hash",
        "the results' provenance",
    ),
]

CATEGORIES = {
    "main_goal_category": Column(
        "main_goal_category",
        STRING,
        _category("goal_main"),
        "interaction goal (MultiVerse's 8)",
        "per-goal scores (MultiVerse Table 3)",
    ),
    "sub_goal_category": Column("sub_goal_category", STRING, _category("goal_sub"), "sub-goal"),
    "main_task_category": Column(
        "main_task_category",
        STRING,
        _category("task_main"),
        "task (main)",
        "per-task scores; AlignMMBench: the category",
    ),
    "sub_task_category": Column(
        "sub_task_category",
        STRING,
        _category("task_sub"),
        "task (sub)",
        "AlignMMBench: the task whose judging rules apply",
    ),
    "image_main_category": Column(
        "image_main_category", STRING, _category("image_main"), "image category (main)", "ProBench: the field breakdown"
    ),
    "image_sub_category": Column("image_sub_category", STRING, _category("image_sub"), "image category (sub)"),
}


def _categories(*names: str) -> list[Column]:
    return [CATEGORIES[name] for name in names]


MULTIVERSE = [
    Column("character", STRING, _persona("character"), "the persona: who is asking"),
    Column("scenario", STRING, _persona("scenario"), "the persona's situation"),
    Column("goal", STRING, _persona("goal"), "what the persona wants from the conversation"),
    _conversation(
        ("checklist",),
        "user and assistant turns; each user turn with its yes/no checklist (question, main and sub criterion)",
        "user turns: the questions; assistant turns: the references (and the Oracle history); "
        "checklist: the checklist-completion judge",
    ),
    *_categories(
        "main_goal_category",
        "sub_goal_category",
        "main_task_category",
        "sub_task_category",
        "image_main_category",
        "image_sub_category",
    ),
]

CONVBENCH = [
    _conversation(
        ("level", "task_category", "reference", "focus_points"),
        "three user turns: perception, reasoning, creation, each with its task category and reference "
        "answer; the creation turn with its focus points",
        "the instructions, the reference conversation (pairwise) and the gold history of settings "
        "(ii) and (iii); focus points: the creation-turn judge",
    ),
    Column(
        "caption",
        STRING,
        lambda s: s.caption,
        "instruction-conditioned caption: the image's facts the answers need",
        "the text-only judge's image context",
    ),
]

PROBENCH = [
    _conversation(
        ("reference",),
        "user turns and the baseline model's answers (assistant turns; the last user "
        "turn's answer also as its `reference`)",
        "the questions; the baseline side of the pairwise judge",
    ),
    Column("language", STRING, lambda s: s.language, "language of the question (ISO 639-1)", "per-language scores"),
    Column(
        "track",
        STRING,
        lambda s: s.track,
        "singleround, multi-linguistic or multi-round",
        "the track (multi-round: per-round scores)",
    ),
    *_categories("main_task_category", "sub_task_category", "image_main_category", "image_sub_category"),
    Column(
        "challenge",
        {"textual": Value("float64"), "image": Value("float64"), "reasoning": Value("float64")},
        lambda s: s.challenge.model_dump() if s.challenge else None,
        "challenge scores 0-10 (text, image, reasoning)",
        "difficulty breakdowns",
    ),
]

ALIGNMMBENCH = [
    Column(
        "history",
        List({"speaker": STRING, "utterance": STRING}),
        lambda s: [{"speaker": t.speaker, "utterance": t.utterance} for t in s.history],
        "earlier turns given as context (the Dialogue Context task)",
        "the dialogue history sent before the question",
    ),
    _conversation(
        ("reference", "task_category"),
        "the question, with its reference answer and task",
        "the question; reference: the judge's reference answer",
    ),
    Column(
        "rewrites",
        List({"text": STRING, "language": STRING, "status": STRING}),
        lambda s: [rewrite.model_dump() for rewrite in s.rewrites],
        "paraphrases of the question (status kept or rejected by review)",
        "each kept rewrite is asked and judged like the question; the spread over them is ours, not the paper's",
    ),
    Column("language", STRING, lambda s: s.language, "language of the question"),
    *_categories("main_task_category", "sub_task_category"),
]

RECIPE_COLUMNS: dict[str, list[Column]] = {
    "multiverse": MULTIVERSE,
    "convbench": CONVBENCH,
    "probench": PROBENCH,
    "alignmmbench": ALIGNMMBENCH,
}


def columns(recipe: str) -> list[Column]:
    """A recipe's columns in release order; a recipe of the user's own gets the union of the four."""
    body = RECIPE_COLUMNS.get(recipe)
    if body is None:
        body = {column.name: column for group in RECIPE_COLUMNS.values() for column in group}
        body["conversation"] = _conversation(
            tuple(name for name in TURN_FEATURES if name not in ("speaker", "utterance")), "all turn fields", "-"
        )
        body = list(body.values())
    return [*HEAD, *body, *TAIL]


def features(recipe: str) -> Features:
    return Features({column.name: column.feature for column in columns(recipe)})


def to_row(sample: Sample, recipe: str) -> dict:
    return {column.name: column.value(sample) for column in columns(recipe)}


def content_row(sample: Sample, recipe: str) -> dict:
    """The row as `to_row` writes it, but the image named by its file name and sha256 instead of read whole."""
    return {
        column.name: (
            {"path": Path(sample.images[0].path).name, "sha256": sample.images[0].sha256}
            if column.name == "image"
            else column.value(sample)
        )
        for column in columns(recipe)
    }


def _type_text(feature) -> str:
    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, Image):
        return "image"
    if isinstance(feature, List):
        return f"list of {_type_text(feature.feature)}"
    if isinstance(feature, dict):
        return "{" + ", ".join(f"{name}: {_type_text(inner)}" for name, inner in feature.items()) + "}"
    return type(feature).__name__


def release_schema_markdown() -> str:
    """docs/release-schema.md: every recipe's columns, their types and the evaluator field each feeds."""
    parts = [
        "# Release schema",
        "",
        "Generated from `curation/release/columns.py` (`python -m benchcurate.curation.release.columns` "
        "rewrites it; a test checks it is current). A release carries only its recipe's columns, with native "
        'types: `ds[0]["conversation"][1]["checklist"]` is a list of dicts, not JSON in a string. Every '
        "release's card lists its own columns and links here.",
        "",
        "Multi-turn data is one row per sample with its turns in `conversation`. An evaluator that scores turn "
        "by turn must state its history setting: the gold history (the earlier turns of `conversation`, as "
        "MultiVerse's Oracle and ConvBench's settings (ii) and (iii)) or the model's own answers; and a limit "
        "counts samples, not turns. `curate eval` does both (`--limit` counts samples). lmms-eval's "
        "OpenAI-compatible model has no multi-round chat, so the exported lmms-eval task runs each question as "
        "a round of its own (one user message with the earlier turns written out: the gold history for "
        "multiverse, the model's own answers for convbench and probench, the given history for alignmmbench), "
        "one document per sample; VLMEvalKit's TSV has a row per question with the gold history written into "
        "`question`.",
        "",
    ]
    for recipe in RECIPE_COLUMNS:
        parts += [f"## {recipe}", "", column_table(recipe), ""]
    return "\n".join(parts)


def column_table(recipe: str) -> str:
    lines = ["| column | type | holds | feeds |", "|---|---|---|---|"]
    lines += [f"| `{c.name}` | {_type_text(c.feature)} | {c.meaning} | {c.feeds} |" for c in columns(recipe)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(release_schema_markdown())
