"""field_classify: ProBench's two-step domain labels - image field and task field, then a sub-field of each.

ProBench (App. B) classifies every query's image (from its pixels) and question (from its text with the image)
into one of 10 fields, then, in a second call that lists the chosen field's sub-fields, into a sub-field; the
annotator may propose a new field or sub-field instead. Fields go to `categories.image_main` / `task_main`,
sub-fields to `image_sub` / `task_sub`; merging proposed spellings is category_normalise's job. An item without
a question gets image labels only.
"""

from __future__ import annotations

from benchcurate.curation.engine.stage import ItemStage, ModelStageConfig, StageContext
from benchcurate.curation.taxonomy import NO_QUESTION, OTHER_NAMES, probench_taxonomy
from benchcurate.schemas import Categories, Drop, Keep, Sample, Scores, Verdict

NONE_LISTED = "- (none listed: give a short new sub-field name)"


class FieldConfig(ModelStageConfig):
    """Prompt version (both steps) and model only."""


def question_of(item: Sample) -> str | None:
    return next((turn.utterance for turn in item.conversation if turn.speaker == "user"), None)


def _menu(kind: str) -> str:
    return "\n".join(f"- {name}: {entry['gloss']}" for name, entry in probench_taxonomy()[kind].items())


def _subfields(kind: str, field: str | None) -> str:
    names = probench_taxonomy()[kind].get(field or "", {}).get("subfields", [])
    return "\n".join(f"- {name}" for name in names) or NONE_LISTED


def _chosen(choice: str | None, proposed: str | None) -> str | None:
    if choice in OTHER_NAMES:
        return " ".join((proposed or "").split()) or None
    return choice


def score(item: Sample, cfg: FieldConfig, ctx: StageContext) -> Scores:
    """Two calls; the decision records the first prompt's version, the scores the second's hash."""
    question = question_of(item)
    text = question or NO_QUESTION
    first = ctx.ask(
        "field_classify",
        cfg.prompt_version,
        item,
        model=cfg.model,
        variables={"image_fields": _menu("image_fields"), "task_fields": _menu("task_fields"), "question": text},
    )
    fields = first.value
    image_field = _chosen(fields.image_field, fields.proposed_image_field)
    task_field = _chosen(fields.question_field, fields.proposed_question_field) if question else None
    second = ctx.ask(
        "subfield_classify",
        cfg.prompt_version,
        item,
        model=cfg.model,
        variables={
            "image_field": image_field or "Other",
            "image_subfields": _subfields("image_fields", image_field),
            "question_field": task_field or "(no question)",
            "question": text,
            "question_subfields": _subfields("task_fields", task_field) if question else "- (no question)",
        },
    )
    subfields = second.value
    return Scores(
        values={
            "image_field": image_field,
            "image_subfield": " ".join(subfields.image_subfield.split()) or None,
            "image_field_proposed": fields.image_field in OTHER_NAMES,
            "task_field": task_field,
            "task_subfield": (" ".join((subfields.question_subfield or "").split()) or None) if question else None,
            "task_field_proposed": question is not None and fields.question_field in OTHER_NAMES,
            "image_reasoning": fields.image_reasoning,
            "question_reasoning": fields.question_reasoning if question else None,
            "subfield_prompt_sha256": second.generation.prompt_sha256,
        },
        generation=first.generation,
    )


def decide(scores: Scores, cfg: FieldConfig) -> Verdict:
    if scores.values["image_field"] is None:
        return Drop(reason="field_missing", detail={"note": "Other was chosen for the image without a proposal"})
    return Keep()


def apply(item: Sample, scores: Scores, cfg: FieldConfig) -> Sample:
    values = scores.values
    labels = {"image_main": values["image_field"], "image_sub": values["image_subfield"]}
    if values["task_field"] is not None:
        labels |= {"task_main": values["task_field"], "task_sub": values["task_subfield"]}
    return item.model_copy(
        update={"categories": Categories.model_validate(item.categories.model_copy(update=labels).model_dump())}
    )


STAGE = ItemStage(
    name="field_classify",
    config=FieldConfig,
    score=score,
    decide=decide,
    apply=apply,
    reasons=("field_missing",),
    uses_model=True,
    prompts=("field_classify", "subfield_classify"),
)
