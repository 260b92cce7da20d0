"""A review record in words, for `curate review pull` and `curate review status`."""

from __future__ import annotations

from pathlib import Path

from benchcurate.schemas.manifest import ReviewSummary
from benchcurate.schemas.review import AgreementFigures, ReviewRecord

SHOWN = 10  # rejected annotations and pending samples listed by name; the rest are counted


def agreement_line(kind: str, figures: AgreementFigures) -> str:
    percent = "-" if figures.percent is None else f"{figures.percent:.0%}"
    kappa = f"{figures.fleiss_kappa:.2f}" if figures.fleiss_kappa is not None else (figures.kappa_undefined or "-")
    return f"  {kind}: agreement {percent}, Fleiss kappa {kappa} ({figures.items_with_two_or_more} with 2+ answers)"


def person(record: ReviewRecord, reviewer: str) -> str:
    name = record.names.get(reviewer)
    return f"{name} ({reviewer})" if name else reviewer


def counts_line(record: ReviewRecord) -> str:
    return (
        f"samples {len(record.samples)}: accepted {record.count('accepted')}, rejected "
        f"{record.count('rejected')}, pending {record.count('pending')}"
    )


def next_step(record: ReviewRecord) -> str | None:
    """What to do about the pending samples, or None when nothing is pending."""
    pending = [outcome for outcome in record.samples.values() if outcome.status == "pending"]
    if not pending:
        return f"nothing pending: rerun `curate run ... --run-id {record.run_id}` to apply the review"
    adjudicate = sum(len(outcome.answers) >= record.reviewers_required for outcome in pending)
    steps = []
    if len(pending) > adjudicate:
        steps.append(
            f"{len(pending) - adjudicate} wait for reviewers (Label Studio's queue, then `curate review pull "
            f"{record.run_id}`)"
        )
    if adjudicate:
        steps.append(
            f"{adjudicate} wait for an adjudicator (`curate review push {record.run_id} --phase 2`, then pull)"
        )
    return "; ".join(steps)


def status_text(record: ReviewRecord) -> str:
    lines = [
        f"{record.project} (round {record.round}), pulled {record.pulled_at:%Y-%m-%d %H:%M} UTC; each sample "
        f"needs {record.reviewers_required} reviewer(s)",
        counts_line(record),
        "agreement:",
    ]
    lines += [agreement_line(kind, figures) for kind, figures in record.agreement.items()] or ["  -"]
    lines.append("reviewers (agrees: with the decision, the majority or the adjudicator on a tie):")
    for reviewer, summary in record.reviewers.items():
        agrees = f"{summary.agreed} of {summary.compared}" + (
            f" ({summary.share:.0%})" if summary.share is not None else ""
        )
        adjudicated = f", {summary.adjudications} adjudicated" if summary.adjudications else ""
        lines.append(
            f"  {person(record, reviewer)}: {summary.annotations} samples, {summary.answers} answers, agrees "
            f"{agrees}, {summary.edits} texts edited{adjudicated}"
        )
    if record.rejected:
        lines.append(f"not counted ({len(record.rejected)}):")
        lines += [
            f"  annotation {entry.annotation_id} (sample {entry.sample_id}, {person(record, entry.reviewer)}): "
            f"{entry.problem}"
            for entry in record.rejected[:SHOWN]
        ]
    pending = [(sample_id, outcome) for sample_id, outcome in record.samples.items() if outcome.status == "pending"]
    if pending:
        lines.append(f"pending ({len(pending)}):")
        lines += [f"  {sample_id}: {outcome.waiting_for}" for sample_id, outcome in pending[:SHOWN]]
    lines.append(f"next: {next_step(record)}")
    return "\n".join(lines)


def review_summary(run_dir: Path) -> ReviewSummary | None:
    """What a release says about its human review, from the run's record (None without one): no names."""
    from benchcurate.curation.review.conversation_review import read_record

    record = read_record(run_dir)
    if record is None:
        return None
    people = {person for outcome in record.samples.values() for person in outcome.reviewers}
    return ReviewSummary(
        reviewers_per_sample=record.reviewers_required,
        people=len(people),
        adjudicated_samples=sum(outcome.phase == 2 for outcome in record.samples.values()),
        agreement=record.agreement,
    )
