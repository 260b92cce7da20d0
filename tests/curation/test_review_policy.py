"""The review policy as a pure function: majority per judgement, edits merged per field against the draft,
adjudication by choice, one voice per person, nothing settled by time. No server."""

import random
from datetime import UTC, datetime

import pytest

from benchcurate.curation.review.conversation_review import apply_edits, apply_outcome
from benchcurate.curation.review.fields import review_fields
from benchcurate.curation.review.policy import RoundInput, Settled, Submitted, decide_round
from benchcurate.schemas import ChecklistItem, Rewrite, Turn
from benchcurate.schemas.review import Adjudication, ReviewerAnswers
from tests.factories import make_sample

YES = {"natural": "yes", "correct": "yes", "needs_image": "yes"}
FIX = "3 faces appear on the left, 2024 figures below\nsecond line, ünïcode 中文"


def sample(seed=1):
    check = [ChecklistItem(question=f"Does it say {n}?", main_criteria="m", sub_criteria="s") for n in ("a", "b", "c")]
    return make_sample(
        seed,
        caption="A caption.",
        rewrites=[Rewrite(text="another way to ask")],
        conversation=[
            Turn(speaker="user", utterance="What is shown?", reference="A cat.", checklist=check),
            Turn(speaker="assistant", utterance="A cat on a mat."),
            Turn(
                speaker="user",
                utterance="Write a poem about it.",
                reference="Cats sit.",
                focus_points=["rhymes", "mentions the mat"],
            ),
        ],
    )


def answers(who, annotation, choices=None, texts=None, notes=None):
    return ReviewerAnswers(
        reviewer=who,
        annotation_id=annotation,
        choices={**YES, "rewrite_0": "keep", **(choices or {})},
        texts=texts or {},
        notes=notes,
    )


def decide(submitted, settled=(), required=2, adjudicators=None, samples=None):
    samples = samples or [sample()]
    return decide_round(
        RoundInput(
            run_id="run",
            project="run review round 1",
            round=1,
            required=required,
            pulled_at=datetime(2025, 1, 1, tzinfo=UTC),
            fields={s.id: review_fields(s) for s in samples},
            submitted=list(submitted),
            settled=list(settled),
            adjudicators=adjudicators,
            names={"ann": "ann@example.org"},
            rejected=[],
        )
    )


def one(record):
    (outcome,) = record.samples.values()
    return outcome


def test_an_edit_wins_over_an_unchanged_submit_and_comes_back_exactly_as_typed():
    draft_submit = answers("bo", 2, texts={"reference_0": "A cat.", "caption": "A caption."})  # the draft sent back
    fixed = answers("ann", 1, texts={"reference_0": FIX})
    for order in ([fixed, draft_submit], [draft_submit, fixed]):  # no timestamps: order cannot matter
        outcome = one(decide([Submitted("s0001", 10, entry) for entry in order]))
        assert outcome.status == "accepted"
        assert outcome.texts["reference_0"].value == FIX and outcome.texts["reference_0"].by == "edit"
        assert set(outcome.texts) == {"reference_0"}  # the caption submitted unchanged is no edit
    item = apply_outcome(sample(), outcome, decide([]))
    assert item.conversation[0].reference == FIX and item.conversation[2].reference == "Cats sit."


def test_two_different_edits_wait_for_an_adjudicator_who_picks_one():
    first = answers("ann", 1, texts={"reference_1": "Cats sit on mats."})
    second = answers("bo", 2, texts={"reference_1": "A cat sits."})
    entries = [Submitted("s0001", 10, first), Submitted("s0001", 10, second)]
    waiting = one(decide(entries))
    assert waiting.status == "pending" and waiting.texts["reference_1"].by == "open"
    assert waiting.texts["reference_1"].versions == {"ann": "Cats sit on mats.", "bo": "A cat sits."}
    assert "reference_1 (different edits)" in waiting.waiting_for and waiting.open_keys() == ["reference_1"]
    ruling = Settled(
        "s0001", 20, [Adjudication(key="reference_1", adjudicator="cy", annotation_id=3, answer="A cat sits.")]
    )
    settled = one(decide(entries, [ruling], adjudicators=frozenset({"cy"})))
    assert settled.status == "accepted" and settled.phase == 2 and settled.texts["reference_1"].value == "A cat sits."
    assert settled.reviewers == ["ann", "bo", "cy"]


def test_checklist_keep_and_delete_are_votes_and_a_tie_is_adjudicated():
    ann = answers("ann", 1, choices={"check_0_0": "delete", "check_0_1": "delete"})
    bo = answers("bo", 2, choices={"check_0_0": "delete"})  # check_0_1 left alone: keep
    entries = [Submitted("s0001", 10, ann), Submitted("s0001", 10, bo)]
    outcome = one(decide(entries))
    assert outcome.questions["check_0_0"].decided == "delete" and outcome.questions["check_0_2"].decided == "keep"
    assert outcome.questions["check_0_1"].by == "open" and outcome.questions["check_0_1"].answers == {
        "ann": "delete",
        "bo": "keep",
    }
    assert outcome.status == "pending"
    ruling = Settled("s0001", 20, [Adjudication(key="check_0_1", adjudicator="cy", annotation_id=3, answer="keep")])
    record = decide(entries, [ruling])
    item = apply_outcome(sample(), one(record), record)
    assert [check.question for check in item.conversation[0].checklist] == ["Does it say b?", "Does it say c?"]


def test_a_majority_no_rejects_with_the_reason_and_a_tie_is_open():
    no = [Submitted("s0001", 10, answers(who, n, choices={"needs_image": "no"})) for n, who in enumerate("abc")]
    rejected = one(decide(no, required=3))
    assert rejected.status == "rejected" and rejected.reasons == ["answerable_without_image"]
    tie = [Submitted("s0001", 10, answers("a", 1, choices={"correct": "no"})), Submitted("s0001", 10, answers("b", 2))]
    outcome = one(decide(tie))
    assert outcome.status == "pending" and outcome.questions["correct"].majority is None
    assert outcome.waiting_for == "an adjudicator to settle correct (a tie)"


def test_one_review_is_not_enough_when_two_are_required():
    outcome = one(decide([Submitted("s0001", 10, answers("ann", 1))]))
    assert outcome.status == "pending" and outcome.waiting_for.startswith("1 of 2 reviews")
    assert one(decide([Submitted("s0001", 10, answers("ann", 1))], required=1)).status == "accepted"


def test_a_person_with_two_different_annotations_counts_not_at_all_and_equal_ones_once():
    twice = [
        Submitted("s0001", 10, answers("ann", 1)),
        Submitted("s0001", 10, answers("ann", 2, {"correct": "no"})),
        Submitted("s0001", 10, answers("bo", 3)),
    ]
    record = decide(twice)
    assert one(record).status == "pending" and [a.reviewer for a in one(record).answers] == ["bo"]
    assert {entry.annotation_id for entry in record.rejected} == {1, 2}
    assert "2 different annotations" in record.rejected[0].problem
    same = [
        Submitted("s0001", 10, answers("ann", 1)),
        Submitted("s0001", 10, answers("ann", 2)),
        Submitted("s0001", 10, answers("bo", 3)),
    ]
    assert one(decide(same)).status == "accepted" and not decide(same).rejected


def test_an_adjudicator_who_reviewed_the_sample_or_lacks_the_role_does_not_count():
    tie = [
        Submitted("s0001", 10, answers("ann", 1, choices={"correct": "no"})),
        Submitted("s0001", 10, answers("bo", 2)),
    ]
    own = Settled("s0001", 20, [Adjudication(key="correct", adjudicator="ann", annotation_id=3, answer="no")])
    other = Settled("s0001", 20, [Adjudication(key="correct", adjudicator="dee", annotation_id=4, answer="yes")])
    record = decide(tie, [own, other], adjudicators=frozenset({"cy"}))
    assert one(record).status == "pending"
    assert sorted(entry.problem.split(" ", 1)[1] for entry in record.rejected) == [
        "does not have the adjudicator role (`curate ls user add EMAIL --role adjudicator`)",
        "reviewed this sample in phase 1 and cannot adjudicate it",
    ]
    two = [
        Settled("s0001", 20, [Adjudication(key="correct", adjudicator=who, annotation_id=n, answer=answer)])
        for n, (who, answer) in enumerate((("cy", "yes"), ("dee", "no")))
    ]
    assert one(decide(tie, two)).questions["correct"].by == "open"  # two adjudicators who differ settle nothing


def test_new_checklist_items_of_every_reviewer_are_kept_once():
    entries = [
        Submitted("s0001", 10, answers("ann", 1, texts={"checkadd_0": "Is it a cat? | Accuracy | animal"})),
        Submitted(
            "s0001",
            10,
            answers("bo", 2, texts={"checkadd_0": "Is it a cat? | Accuracy | animal\nIs the mat red? | Colour | mat"}),
        ),
    ]
    record = decide(entries)
    assert one(record).additions == {
        "checkadd_0": ["Is it a cat? | Accuracy | animal", "Is the mat red? | Colour | mat"]
    }
    added = apply_outcome(sample(), one(record), record).conversation[0].checklist[-2:]
    assert [(c.question, c.main_criteria, c.sub_criteria, c.source_model) for c in added] == [
        ("Is it a cat?", "Accuracy", "animal", "reviewer"),
        ("Is the mat red?", "Colour", "mat", "reviewer"),
    ]


def test_agreement_and_per_reviewer_figures_equal_a_hand_computation():
    samples = [sample(seed) for seed in range(1, 5)]
    votes = {1: ("yes", "yes"), 2: ("yes", "no"), 3: ("no", "no"), 4: ("yes", "yes")}  # needs_image per sample
    entries = [
        Submitted(f"s{seed:04d}", seed, answers(who, 10 * seed + k, {"needs_image": votes[seed][k]}))
        for seed in votes
        for k, who in enumerate(("ann", "bo"))
    ]
    ruling = Settled("s0002", 99, [Adjudication(key="needs_image", adjudicator="cy", annotation_id=99, answer="no")])
    record = decide(entries, [ruling], samples=samples)
    figures = record.agreement["needs_image"]
    # 4 pairs, 3 agree; shares yes 5/8, no 3/8: p_e = 25/64 + 9/64 = 34/64; p_o = 3/4
    assert figures.percent == pytest.approx(3 / 4)
    assert figures.fleiss_kappa == pytest.approx((3 / 4 - 34 / 64) / (1 - 34 / 64))
    natural = record.agreement["natural"]
    assert (
        natural.percent == 1.0
        and natural.fleiss_kappa is None
        and natural.kappa_undefined == "undefined: every answer was 'yes'"
    )
    # ann agrees with every decision; bo said "no" on s0002, which the adjudicator decided "no" as well
    decisions = 4 * 3 + 4 + 4 * 3  # criteria, rewrites, checklist items per sample
    assert (record.reviewers["ann"].compared, record.reviewers["ann"].agreed) == (decisions, decisions - 1)
    assert (record.reviewers["bo"].compared, record.reviewers["bo"].agreed) == (decisions, decisions)
    assert record.reviewers["cy"].adjudications == 1 and record.count("accepted") == 2
    assert record.count("rejected") == 2  # s0003: both said no; s0002: the adjudicator said no


def test_the_record_does_not_depend_on_the_order_annotations_arrive_in():
    samples = [sample(seed) for seed in range(1, 4)]
    entries = [
        Submitted(
            f"s{seed:04d}",
            seed,
            answers(
                who,
                10 * seed + n,
                {"correct": random.Random(seed + n).choice(["yes", "no"])},
                {"reference_0": f"fix {seed}"} if who == "ann" else {},
            ),
        )
        for seed in range(1, 4)
        for n, who in enumerate(("ann", "bo"))
    ]
    shuffled = entries[:]
    random.Random(7).shuffle(shuffled)
    assert decide(entries, samples=samples) == decide(shuffled, samples=samples)


@pytest.mark.parametrize(
    ("typed", "points"),
    [
        ("3 faces appear\n2024 figures", ["3 faces appear", "2024 figures"]),
        (
            "1. names the light\n2) stays short\n- no list\n* starred",
            ["names the light", "stays short", "no list", "starred"],
        ),
        ("  12 apostles \n\n10. tenth", ["12 apostles", "tenth"]),
    ],
)
def test_focus_points_keep_their_leading_numbers_and_lose_only_list_markers(typed, points):
    edited = apply_edits(sample(), {"focus_1": typed})
    assert edited.conversation[2].focus_points == points
