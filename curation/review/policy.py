"""How a review round is settled, as one pure function of what people submitted: `decide_round`.

- A sample needs `required` distinct people (conversation_review.reviewers). Until it has them it is pending.
- One person, one voice: someone with two annotations of a sample that differ has neither counted (the pull says
  so); two equal ones count once. Nothing is settled by time.
- Judgements (criteria, rewrites, checklist keep/delete) go by majority; a tie is open until an adjudicator
  answers it. A majority "no" on a criterion rejects the sample with the criterion's reason code.
- Texts are merged per field against the draft: a text equal to the draft (or left empty) is no edit; one edited
  version (from one person, or the same from several) wins over unchanged submits; two different edited versions
  are open, both kept, until an adjudicator picks one or writes the final text.
- New checklist items of all reviewers are kept (the same line once).
- An adjudicator's answer counts when they hold the adjudicator role (when roles are known) and did not review
  that sample themselves; it settles the question it answers, a tie or (after `--all`) a majority. Two
  adjudicators who differ leave the question open.

Agreement (percent, Fleiss' kappa) and per-person figures come from the same answers: `round_statistics`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from benchcurate.curation.review.agreement import figures, majority
from benchcurate.curation.review.fields import CRITERIA, REJECT_REASONS, ReviewFields
from benchcurate.schemas.review import (
    Adjudication,
    QuestionOutcome,
    RejectedAnnotation,
    ReviewerAnswers,
    ReviewerSummary,
    ReviewRecord,
    SampleOutcome,
    TextOutcome,
)

AGREEMENT_KINDS = (*CRITERIA, "rewrite", "check")


@dataclass(frozen=True)
class Submitted:
    """An annotation that parsed: who, which sample, which task, and what it says."""

    sample_id: str
    task_id: int
    answers: ReviewerAnswers


@dataclass(frozen=True)
class Settled:
    """A phase-2 annotation that parsed: the adjudicator's answers to the open questions of one sample."""

    sample_id: str
    task_id: int
    answers: list[Adjudication]


@dataclass(frozen=True)
class RoundInput:
    run_id: str
    project: str
    round: int
    required: int
    pulled_at: datetime
    fields: dict[str, ReviewFields]  # every pushed sample
    submitted: list[Submitted]
    settled: list[Settled]
    adjudicators: frozenset[str] | None  # people with the adjudicator role; None: roles unknown
    names: dict[str, str]
    rejected: list[RejectedAnnotation]  # what did not parse, or was changed by someone else


def decide_round(given: RoundInput) -> ReviewRecord:
    """The round's record: every sample's outcome, the rejected annotations with their reasons, the statistics."""
    rejected = list(given.rejected)
    by_sample: dict[str, list[Submitted]] = defaultdict(list)
    for entry in given.submitted:
        by_sample[entry.sample_id].append(entry)
    samples: dict[str, SampleOutcome] = {}
    for sample_id, fields in given.fields.items():
        answers, doubled = one_per_person(by_sample.get(sample_id, []))
        rejected += doubled
        reviewers = {entry.reviewer for entry in answers}
        adjudications, refused = valid_adjudications(sample_id, given.settled, reviewers, given.adjudicators)
        rejected += refused
        samples[sample_id] = settle(fields, answers, adjudications, given.required)
    agreement, people = round_statistics(given.fields, samples)
    return ReviewRecord(
        run_id=given.run_id,
        project=given.project,
        round=given.round,
        reviewers_required=given.required,
        pulled_at=given.pulled_at,
        samples=samples,
        agreement=agreement,
        reviewers=people,
        names=given.names,
        rejected=rejected,
    )


def one_per_person(entries: list[Submitted]) -> tuple[list[ReviewerAnswers], list[RejectedAnnotation]]:
    """Each person's answers once; a person whose annotations of the sample differ counts not at all."""
    by_person: dict[str, list[Submitted]] = defaultdict(list)
    for entry in entries:
        by_person[entry.answers.reviewer].append(entry)
    kept, refused = [], []
    for person, own in sorted(by_person.items()):
        if len({_content(entry.answers) for entry in own}) == 1:
            kept.append(own[0].answers)
            continue
        ids = ", ".join(str(entry.answers.annotation_id) for entry in own)
        refused += [
            RejectedAnnotation(
                sample_id=entry.sample_id,
                task_id=entry.task_id,
                annotation_id=entry.answers.annotation_id,
                reviewer=person,
                phase=1,
                problem=f"{person} has {len(own)} different annotations of this sample "
                f"({ids}); none counts: delete all but one in Label Studio",
            )
            for entry in own
        ]
    return kept, refused


def _content(answers: ReviewerAnswers) -> str:
    return repr((sorted(answers.choices.items()), sorted(answers.texts.items()), answers.notes))


def valid_adjudications(
    sample_id: str, settled: Iterable[Settled], reviewers: set[str], adjudicators: frozenset[str] | None
) -> tuple[list[Adjudication], list[RejectedAnnotation]]:
    kept, refused = [], []
    for entry in settled:
        if entry.sample_id != sample_id or not entry.answers:
            continue
        who, annotation = entry.answers[0].adjudicator, entry.answers[0].annotation_id
        problem = (
            f"{who} reviewed this sample in phase 1 and cannot adjudicate it"
            if who in reviewers
            else f"{who} does not have the adjudicator role (`curate ls user add EMAIL --role adjudicator`)"
            if adjudicators is not None and who not in adjudicators
            else None
        )
        if problem:
            refused.append(
                RejectedAnnotation(
                    sample_id=sample_id,
                    task_id=entry.task_id,
                    annotation_id=annotation,
                    reviewer=who,
                    phase=2,
                    problem=problem,
                )
            )
        else:
            kept += entry.answers
    return kept, refused


def settle(
    fields: ReviewFields, answers: list[ReviewerAnswers], adjudications: list[Adjudication], required: int
) -> SampleOutcome:
    """One sample's outcome from its reviewers' answers (one entry per person) and its valid adjudications."""
    ruling: dict[str, set[str]] = defaultdict(set)
    for adjudication in adjudications:
        ruling[adjudication.key].add(adjudication.answer)
    questions = {question.key: _vote(question.key, question.default, answers, ruling) for question in fields.questions}
    deleted = {
        key.replace("check_", "checkedit_", 1)
        for key, outcome in questions.items()
        if key.startswith("check_") and outcome.decided == "delete"
    }
    texts = {
        field.key: outcome
        for field in fields.texts
        if field.key not in deleted
        for outcome in [_merge(field.key, field.draft, answers, ruling)]
        if outcome is not None
    }
    additions = {key: lines for key in fields.additions if (lines := _added(key, answers))}
    used = [a for a in adjudications if len(ruling[a.key]) == 1 and (a.key in questions or a.key in texts)]
    outcome = SampleOutcome(
        status="pending",
        phase=2 if used else 1,
        reviewers=[a.reviewer for a in answers] + sorted({a.adjudicator for a in used}),
        answers=answers,
        questions=questions,
        texts=texts,
        additions=additions,
        adjudications=used,
        notes=[a.notes for a in answers if a.notes],
    )
    reasons = [REJECT_REASONS[name] for name in CRITERIA if questions[name].decided == "no"]
    if len(answers) < required:
        outcome.waiting_for = (
            f"{len(answers)} of {required} reviews; Label Studio's queue gives the task to the next reviewer"
        )
    elif reasons:
        outcome.status, outcome.reasons = "rejected", reasons
    elif outcome.open_keys():
        outcome.waiting_for = "an adjudicator to settle " + ", ".join(
            f"{key} ({'a tie' if key in questions else 'different edits'})" for key in outcome.open_keys()
        )
    else:
        outcome.status = "accepted"
    return outcome


def _vote(
    key: str, default: str | None, answers: list[ReviewerAnswers], ruling: dict[str, set[str]]
) -> QuestionOutcome:
    given = {a.reviewer: a.choices.get(key, default) for a in answers if a.choices.get(key, default) is not None}
    most = majority(list(given.values()))
    if len(ruling.get(key, ())) == 1:
        return QuestionOutcome(answers=given, majority=most, decided=next(iter(ruling[key])), by="adjudication")
    return QuestionOutcome(answers=given, majority=most, decided=most, by="majority" if most is not None else "open")


def _merge(key: str, draft: str, answers: list[ReviewerAnswers], ruling: dict[str, set[str]]) -> TextOutcome | None:
    versions = {a.reviewer: text for a in answers if (text := a.texts.get(key, "").strip()) and text != draft.strip()}
    if len(ruling.get(key, ())) == 1:
        return TextOutcome(draft=draft, versions=versions, value=next(iter(ruling[key])), by="adjudication")
    if not versions:
        return None
    distinct = set(versions.values())
    return TextOutcome(
        draft=draft,
        versions=versions,
        value=distinct.pop() if len(distinct) == 1 else None,
        by="edit" if len(set(versions.values())) == 1 else "open",
    )


def _added(key: str, answers: list[ReviewerAnswers]) -> list[str]:
    lines: list[str] = []
    for answer in answers:
        lines += [
            line.strip()
            for line in answer.texts.get(key, "").splitlines()
            if line.strip() and line.strip() not in lines
        ]
    return lines


def round_statistics(
    fields: dict[str, ReviewFields], samples: dict[str, SampleOutcome]
) -> tuple[dict, dict[str, ReviewerSummary]]:
    """Agreement per kind of judgement over every phase-1 answer, and per person: annotations, answers, how many
    of them equal the decision, texts edited, adjudications given."""
    ratings: dict[str, dict[str, list[str]]] = {kind: {} for kind in AGREEMENT_KINDS}
    people: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for sample_id, outcome in samples.items():
        kinds = {question.key: question.kind for question in fields[sample_id].questions}
        for key, question in outcome.questions.items():
            ratings[kinds[key]][f"{sample_id}/{key}"] = list(question.answers.values())
            for person, answer in question.answers.items():
                people[person]["answers"] += 1
                if question.decided is not None and question.by != "open":
                    people[person]["compared"] += 1
                    people[person]["agreed"] += answer == question.decided
        for answer in outcome.answers:
            people[answer.reviewer]["annotations"] += 1
        for text in outcome.texts.values():
            for person in text.versions:
                people[person]["edits"] += 1
        for adjudication in outcome.adjudications:
            people[adjudication.adjudicator]["adjudications"] += 1
    agreement = {kind: figures(ratings[kind]) for kind in AGREEMENT_KINDS if ratings[kind]}
    summaries = {
        person: ReviewerSummary(
            annotations=counts["annotations"],
            answers=counts["answers"],
            compared=counts["compared"],
            agreed=counts["agreed"],
            share=counts["agreed"] / counts["compared"] if counts["compared"] else None,
            edits=counts["edits"],
            adjudications=counts["adjudications"],
        )
        for person, counts in sorted(people.items())
    }
    return agreement, summaries
