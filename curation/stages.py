"""Which stages exist: one line per stage. A recipe names stages from this table."""

from benchcurate.curation.generation import checklist, conversation, goal_task, ladder, persona, rewrites
from benchcurate.curation.images import category, exact_dedup, ingest, near_dedup, phash, quality
from benchcurate.curation.review import conversation_review
from benchcurate.curation.selection import balance, min_size, tracks, weighted_sample
from benchcurate.curation.stage import Stage
from benchcurate.curation.taxonomy import fields, normalise
from benchcurate.curation.text import judgements, language, query_filter
from benchcurate.curation.text import near_dedup as text_near_dedup

STAGES: dict[str, Stage] = {stage.name: stage for stage in (
    ingest.STAGE,
    exact_dedup.STAGE,
    phash.STAGE,
    near_dedup.STAGE,
    quality.STAGE,
    category.STAGE,
    query_filter.STAGE,
    text_near_dedup.STAGE,
    language.STAGE,
    fields.STAGE,
    normalise.STAGE,
    min_size.STAGE,
    balance.STAGE,
    judgements.BLINDNESS,
    judgements.BASELINE,
    judgements.CHALLENGE,
    judgements.INTERDEPENDENCY,
    tracks.STAGE,
    weighted_sample.STAGE,
    persona.STAGE,
    conversation.STAGE,
    goal_task.STAGE,
    normalise.TASK_STAGE,
    checklist.STAGE,
    ladder.LADDER,
    ladder.CAPTION,
    ladder.REFERENCE,
    ladder.FOCUS_POINTS,
    rewrites.QUESTION,
    rewrites.PARAPHRASE,
    rewrites.DIALOGUE,
    conversation_review.STAGE,
)}
