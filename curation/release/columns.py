"""The release's columns: MultiVerse's Hugging Face fields exactly, then provenance, review and producer columns."""

from __future__ import annotations

import json
from pathlib import Path

from datasets import Features, Image, List, Value

from benchcurate.schemas import Sample

STRING = Value("string")
CHECKLIST = List({"question": STRING, "main_criteria": STRING, "sub_criteria": STRING})

FEATURES = Features({
    # MultiVerse release fields
    "index": STRING, "image": Image(), "character": STRING, "scenario": STRING, "goal": STRING,
    "conversation": List({"speaker": STRING, "utterance": STRING, "checklist": CHECKLIST}),
    "main_goal_category": STRING, "sub_goal_category": STRING, "main_task_category": STRING,
    "sub_task_category": STRING, "image_main_category": STRING, "image_sub_category": STRING,
    # provenance, review and who produced what
    "source_dataset": STRING, "source_id": STRING, "license": STRING, "attribution": STRING,
    "image_sha256": STRING, "image_phash": STRING, "review_status": STRING, "review_mode": STRING,
    "generated_by": STRING,
    # the other papers' fields (ConvBench, ProBench, AlignMMBench); per-turn ones as JSON, one entry per turn
    "caption": STRING, "language": STRING, "track": STRING, "turn_details": STRING, "history": STRING,
    "rewrites": STRING,
})


def to_row(sample: Sample) -> dict:
    image = sample.images[0]
    persona = sample.persona
    categories = sample.categories
    return {
        "index": sample.id,
        "image": {"bytes": Path(image.path).read_bytes(), "path": Path(image.path).name},
        "character": persona.character if persona else None,
        "scenario": persona.scenario if persona else None,
        "goal": persona.goal if persona else None,
        "conversation": [{"speaker": turn.speaker, "utterance": turn.utterance,
                          "checklist": [{"question": item.question, "main_criteria": item.main_criteria,
                                         "sub_criteria": item.sub_criteria} for item in turn.checklist]}
                         for turn in sample.conversation],
        "main_goal_category": categories.goal_main, "sub_goal_category": categories.goal_sub,
        "main_task_category": categories.task_main, "sub_task_category": categories.task_sub,
        "image_main_category": categories.image_main, "image_sub_category": categories.image_sub,
        "source_dataset": sample.provenance.source_dataset, "source_id": sample.provenance.source_id,
        "license": sample.provenance.license, "attribution": sample.provenance.attribution,
        "image_sha256": image.sha256, "image_phash": image.phash,
        "review_status": sample.review.status, "review_mode": sample.review.mode,
        "generated_by": json.dumps({name: generation.model_dump(mode="json")
                                    for name, generation in sorted(sample.generated_by.items())}),
        "caption": sample.caption, "language": sample.language, "track": sample.track,
        "turn_details": json.dumps([turn.model_dump(include={"level", "task_category", "reference", "focus_points"})
                                    for turn in sample.conversation], ensure_ascii=False),
        "history": json.dumps([turn.model_dump(include={"speaker", "utterance"}) for turn in sample.history],
                              ensure_ascii=False),
        "rewrites": json.dumps([rewrite.model_dump() for rewrite in sample.rewrites], ensure_ascii=False),
    }
