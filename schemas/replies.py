"""Shapes of model replies. Every model call names one of these as its structured-output schema.

Taxonomy names are the papers' (MultiVerse App. E: 32 image categories plus "Others"; 20 main checklist criteria).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from benchcurate.schemas.sample import Speaker, Strict

ImageCategoryName = Literal[
    "Vehicles and Transportation",
    "Food and Cuisine",
    "People and Lifestyle",
    "Sports and Recreation",
    "Animals and Wildlife",
    "Objects, Clothing, and Accessories",
    "Brands and Products",
    "Architecture and Landmarks",
    "Tradition and History",
    "Fine Art and Illustrations",
    "Celebrities and Public Figures",
    "Science and Technology",
    "Chemistry and Lab Equipment",
    "Mathematics and Symbols",
    "Nature and Landscapes",
    "Healthcare and Medicine",
    "Programming and Coding",
    "Web Design and User Interfaces",
    "Mobile and Smart Devices",
    "Weather and Climate",
    "Festivals and Events",
    "Education and Learning",
    "Entertainment and Media",
    "Interior Design and Furniture",
    "Natural Disasters and Environmental Hazards",
    "Abstract and Conceptual Art",
    "Business and Finance",
    "Law and Government",
    "Diagrams and Schematics",
    "Charts and Graphs",
    "Documents and Paperwork",
    "Receipts and Invoices",
    "Others",
]

# ProBench App. B: 10 task fields and 10 image fields, plus "Other" (which proposes a new field)
TaskFieldName = Literal[
    "Coding",
    "Information Extraction",
    "Knowledge",
    "Mathematics",
    "Metrics",
    "Perception",
    "Planning",
    "Science",
    "Creative Writing",
    "Arts and Humanities",
    "Other",
]
ImageFieldName = Literal[
    "Document and Text-based Images",
    "Medical Images",
    "Photographs",
    "Scientific and Analytical Images",
    "Graphics and Artistic Images",
    "Screenshots and UI Elements",
    "Remote Sensing and Satellite Images",
    "Security and Surveillance",
    "Engineering and Technical Drawings",
    "Specialized Formats",
    "Other",
]

# MultiVerse App. C.1: 8 interaction goals (their 484 sub-goals are open vocabulary)
GoalName = Literal[
    "Verification", "Analysis", "Exploration", "Optimization", "Calculation", "Understanding", "Research", "Creation"
]

# AlignMMBench Sec. 3.1: 13 tasks in 3 categories (the two Dialogue Context tasks are not asked of single images)
AlignTaskName = Literal[
    "Description",
    "Recognition",
    "Counting",
    "OCR",
    "Meme",
    "Knowledge",
    "Reasoning",
    "Chart",
    "Problem",
    "Comparison",
    "Writing",
]

ChecklistCriterion = Literal[
    "Engagingness",
    "Tone & Style Appropriateness",
    "Contextual Understanding",
    "Memory",
    "Proactiveness",
    "Clarity & Logical Structure",
    "Coherence",
    "Knowledge Understanding",
    "Factual Correctness",
    "Specificity & Informativeness",
    "Cognitive Reasoning",
    "Creativity",
    "Problem-Solving Capability",
    "Helpfulness",
    "Instruction Following",
    "Harmlessness & Ethical Awareness",
    "Perceptual Understanding",
    "Fluency & Grammatical Accuracy",
    "Adaptability",
    "Multimodal Consistency",
]


class TextReply(Strict):
    """A free-text reply (no response_format is sent): the model under test's answer, or a judge's verdict in the
    paper's own format, read by the request's parser."""

    text: str


class QualityReply(Strict):
    rationale: str = Field(description="one or two sentences on clarity, composition, lighting and informativeness")
    quality_score: int = Field(ge=1, le=5, description="1 very low to 5 very high")


class CategoryReply(Strict):
    category: ImageCategoryName
    sub_category: str = Field(description="a finer label inside the category, as a short noun phrase")
    proposed_category: str | None = Field(description="a new category name when category is 'Others', else null")


class FieldReply(Strict):
    """Step one of ProBench's classification: the image's field and the question's task field."""

    image_reasoning: str = Field(description="one or two sentences on what the image shows")
    image_field: ImageFieldName
    proposed_image_field: str | None = Field(description="a new field name when image_field is 'Other', else null")
    question_reasoning: str | None = Field(
        description="one or two sentences on what the question asks; null when there is no question"
    )
    question_field: TaskFieldName | None = Field(description="null when there is no question")
    proposed_question_field: str | None = Field(
        description="a new field name when question_field is 'Other', else null"
    )


class SubfieldReply(Strict):
    """Step two: a sub-field inside each field chosen in step one (an existing one, or a proposed name)."""

    image_subfield: str = Field(description="one of the listed image sub-fields, or a short new name")
    question_subfield: str | None = Field(
        description="one of the listed task sub-fields, or a short new name; null when there is no question"
    )


class CaptionReply(Strict):
    """ConvBench's instruction-conditioned caption."""

    caption: str = Field(description="a detailed description holding every visual fact the instructions need")


class LadderReply(Strict):
    """ConvBench's three instructions about one image, one per capability level, each building on the last."""

    perception: str = Field(description="asks about what can be seen")
    reasoning: str = Field(description="asks for reasoning that builds on the answer to the perception question")
    creation: str = Field(description="asks for something new built on the first two answers")


class ReferenceReply(Strict):
    """Reference answers to the three ladder instructions, each aware of the earlier ones."""

    perception_answer: str
    reasoning_answer: str
    creation_answer: str


class FocusPointsReply(Strict):
    """What a good answer to the creation instruction must do, as yes/no points."""

    points: list[str] = Field(description="3 to 6 short, checkable points")


class GoalTaskReply(Strict):
    """MultiVerse's labels of a conversation: what the user is after (goal) and what the assistant must do (task)."""

    goal: GoalName
    sub_goal: str = Field(description="a short noun phrase, e.g. 'trend verification'")
    task: str = Field(
        description="the kind of work the conversation needs, as a short noun phrase, e.g. 'chart analysis'"
    )
    sub_task: str = Field(description="a finer short noun phrase")


class SeedQuestionReply(Strict):
    """One AlignMMBench-style test case for an image: its task, a question and a reference answer."""

    task: AlignTaskName
    question: str
    reference_answer: str = Field(description="correct, self-contained, in the question's language")


class ParaphraseReply(Strict):
    """Rewrites of a question that keep its meaning."""

    rewrites: list[str]


class IncoherenceReply(Strict):
    """A dialogue history in which the assistant answered wrongly, and the user asking for a correction."""

    first_question: str
    wrong_answer: str = Field(description="plausible but contradicted by the image")
    what_is_wrong: str
    correction_request: str = Field(description="the user's next turn: points out the error, asks to fix it")
    corrected_answer: str


class YesNoReply(Strict):
    """A judgement with its reasoning first (ProBench's blindness and interdependency checks)."""

    reasoning: str
    decision: Literal["YES", "NO"]


class Dimension(Strict):
    explanation: str
    score: int = Field(ge=0, le=10)


class ChallengeReply(Strict):
    """ProBench's challenge assessment: three dimensions, 0-10 each."""

    textual: Dimension = Field(description="how hard the text of the request is to understand and satisfy")
    image: Dimension = Field(description="how hard the image is to perceive and interpret")
    reasoning: Dimension = Field(description="how much reasoning or expertise a good answer needs")


class AnswerReply(Strict):
    answer: str


class PersonaReply(Strict):
    character: str = Field(description="2-3 sentences describing a fictional person, not anyone shown in the image")
    scenario: str
    goal: str = Field(description="a concise phrase")


class Utterance(Strict):
    speaker: Speaker
    text: str


class ConversationReply(Strict):
    utterances: list[Utterance] = Field(description="alternating user and assistant utterances, user first")


class ChecklistQuestion(Strict):
    question: str = Field(description="answerable with yes or no; yes is the good outcome")
    main_criteria: str = Field(description="one of the seeded criteria, or a new one when none fits")
    sub_criteria: str = Field(description="a concise noun phrase")


class TurnChecklist(Strict):
    user_turn: int = Field(ge=1, description="1-based index of the user utterance among user utterances")
    items: list[ChecklistQuestion] = Field(min_length=1)


class ChecklistReply(Strict):
    checklists: list[TurnChecklist]
