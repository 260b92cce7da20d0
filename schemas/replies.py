"""Shapes of model replies. Every model call names one of these as its structured-output schema.

Taxonomy names are the papers' (MultiVerse App. E: 32 image categories plus "Others"; 20 main checklist criteria).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.sample import Speaker, Strict

ImageCategoryName = Literal[
    "Vehicles and Transportation", "Food and Cuisine", "People and Lifestyle", "Sports and Recreation",
    "Animals and Wildlife", "Objects, Clothing, and Accessories", "Brands and Products",
    "Architecture and Landmarks", "Tradition and History", "Fine Art and Illustrations",
    "Celebrities and Public Figures", "Science and Technology", "Chemistry and Lab Equipment",
    "Mathematics and Symbols", "Nature and Landscapes", "Healthcare and Medicine", "Programming and Coding",
    "Web Design and User Interfaces", "Mobile and Smart Devices", "Weather and Climate", "Festivals and Events",
    "Education and Learning", "Entertainment and Media", "Interior Design and Furniture",
    "Natural Disasters and Environmental Hazards", "Abstract and Conceptual Art", "Business and Finance",
    "Law and Government", "Diagrams and Schematics", "Charts and Graphs", "Documents and Paperwork",
    "Receipts and Invoices", "Others",
]

ChecklistCriterion = Literal[
    "Engagingness", "Tone & Style Appropriateness", "Contextual Understanding", "Memory", "Proactiveness",
    "Clarity & Logical Structure", "Coherence", "Knowledge Understanding", "Factual Correctness",
    "Specificity & Informativeness", "Cognitive Reasoning", "Creativity", "Problem-Solving Capability",
    "Helpfulness", "Instruction Following", "Harmlessness & Ethical Awareness", "Perceptual Understanding",
    "Fluency & Grammatical Accuracy", "Adaptability", "Multimodal Consistency",
]


class QualityReply(Strict):
    rationale: str = Field(description="one or two sentences on clarity, composition, lighting and informativeness")
    quality_score: int = Field(ge=1, le=5, description="1 very low to 5 very high")


class CategoryReply(Strict):
    category: ImageCategoryName
    sub_category: str = Field(description="a finer label inside the category, as a short noun phrase")
    proposed_category: str | None = Field(description="a new category name when category is 'Others', else null")


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
