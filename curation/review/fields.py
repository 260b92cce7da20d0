"""What a reviewer can judge and edit in one sample, named once for the page, the pull, the policy and the stage.

Names (t: the index of a user turn among the sample's user turns; j: an item of that turn's checklist; i: a
paraphrase rewrite):

- judgements, settled by majority: the three criteria of MultiVerse's review (`natural`, `correct`,
  `needs_image`; Sec. 3.4), `rewrite_<i>` keep/reject (AlignMMBench reviewed every rewrite), `check_<t>_<j>`
  keep/delete of a checklist item (MultiVerse reviewed its checklists; not answering keeps the item);
- texts, merged per field against the draft: `caption`, `reference_<t>`, `focus_<t>` (one point per line) and
  `checkedit_<t>_<j>` (a checklist question rewritten) (ConvBench refined its drafts by hand);
- additions: `checkadd_<t>`, new checklist items for turn t, one per line: `question | main | sub`.

The "correct" question asks only about what the page shows: the references when the sample has any (ConvBench,
AlignMMBench), otherwise the assistant's answers (MultiVerse).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchcurate.schemas import Sample

CRITERIA = ("natural", "correct", "needs_image")
REJECT_REASONS = {"natural": "unnatural", "correct": "incorrect", "needs_image": "answerable_without_image"}
KINDS = {"criteria": ("yes", "no"), "rewrite": ("keep", "reject"), "check": ("keep", "delete")}


@dataclass(frozen=True)
class Question:
    """A judgement with a closed set of answers; `default` is what not answering means (None: an answer is
    required)."""

    key: str
    answers: tuple[str, ...]
    label: str
    default: str | None = None

    @property
    def kind(self) -> str:
        """`natural`/`correct`/`needs_image`, `rewrite` or `check`: how agreement is pooled."""
        return self.key.split("_")[0] if self.key.startswith(("rewrite_", "check_")) else self.key


@dataclass(frozen=True)
class TextField:
    key: str
    draft: str
    label: str


@dataclass(frozen=True)
class ReviewFields:
    questions: tuple[Question, ...]
    texts: tuple[TextField, ...]
    additions: tuple[str, ...]

    def question(self, key: str) -> Question | None:
        return next((question for question in self.questions if question.key == key), None)

    def text(self, key: str) -> TextField | None:
        return next((field for field in self.texts if field.key == key), None)


def user_turns(sample: Sample) -> list[int]:
    """Positions in `sample.conversation` of its user turns, in order (t indexes this list)."""
    return [position for position, turn in enumerate(sample.conversation) if turn.speaker == "user"]


def criteria_labels(sample: Sample) -> dict[str, str]:
    """The three questions as this sample's page asks them: about what it shows."""
    references = any(turn.reference for turn in sample.conversation)
    answers = any(turn.speaker == "assistant" for turn in sample.conversation)
    single = len(user_turns(sample)) == 1
    correct = (
        "Are the reference answers correct (with your edits)?"
        if references
        else "Are the assistant's answers correct?"
        if answers
        else "Is the request clear and answerable?"
    )
    return {
        "natural": "Is the question natural: would a real user ask it like this?"
        if single
        else "Is the conversation natural: would a real user talk like this?",
        "correct": correct,
        "needs_image": "Does answering need the image (not answerable from the text alone)?",
    }


def review_fields(sample: Sample) -> ReviewFields:
    labels = criteria_labels(sample)
    questions = [Question(name, KINDS["criteria"], labels[name]) for name in CRITERIA]
    questions += [
        Question(f"rewrite_{i}", KINDS["rewrite"], f"Rewrite {i + 1}: {rewrite.text}")
        for i, rewrite in enumerate(sample.rewrites)
    ]
    texts = [TextField("caption", sample.caption, "Caption")] if sample.caption else []
    additions = []
    for t, position in enumerate(user_turns(sample)):
        turn = sample.conversation[position]
        if turn.reference:
            texts.append(TextField(f"reference_{t}", turn.reference, f"Reference answer to turn {t + 1}"))
        if turn.focus_points:
            texts.append(TextField(f"focus_{t}", "\n".join(turn.focus_points), f"Focus points of turn {t + 1}"))
        for j, item in enumerate(turn.checklist):
            label = f"Turn {t + 1}, item {j + 1}: {item.question}"
            questions.append(Question(f"check_{t}_{j}", KINDS["check"], label, default="keep"))
            texts.append(TextField(f"checkedit_{t}_{j}", item.question, label))
        if turn.checklist:
            additions.append(f"checkadd_{t}")
    return ReviewFields(tuple(questions), tuple(texts), tuple(additions))
