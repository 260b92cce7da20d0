"""The offline backend: deterministic heuristics from pixel statistics and templates, no model involved.

It exists so the pipeline runs anywhere without a key or a GPU. Every output carries the backend label
`offline-heuristic` (decisions, samples, release card) and must never be presented as model output.
Heuristics are keyed by prompt id; a prompt without a heuristic is an error, not a silent default.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from pydantic import BaseModel

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.models.base import ModelRequest, ModelResult, generation_for
from benchcurate.curation.models.identity import HEURISTICS_VERSION, OFFLINE_LABEL, backend_identity
from benchcurate.curation.models.image_stats import ImageStats, stored_stats
from benchcurate.curation.taxonomy import NO_QUESTION
from benchcurate.schemas import BackendSpec
from benchcurate.schemas.replies import (
    AnswerReply,
    CaptionReply,
    CategoryReply,
    ChallengeReply,
    ChecklistQuestion,
    ChecklistReply,
    ConversationReply,
    Dimension,
    FieldReply,
    FocusPointsReply,
    GoalTaskReply,
    IncoherenceReply,
    LadderReply,
    ParaphraseReply,
    PersonaReply,
    QualityReply,
    ReferenceReply,
    SeedQuestionReply,
    SubfieldReply,
    TurnChecklist,
    Utterance,
    YesNoReply,
)

# --- image quality -------------------------------------------------------------------------------


def quality(stats: ImageStats) -> QualityReply:
    """1-5 from size, sharpness and contrast; small flat marks count as icons (grade 1)."""
    longest, shortest = max(stats.width, stats.height), min(stats.width, stats.height)
    if longest <= 128 and stats.palette_size <= 6 and stats.flat_fraction >= 0.5:
        return QualityReply(
            rationale="small flat mark with a handful of colours: reads as an icon or logo", quality_score=1
        )
    if shortest < 160:
        return QualityReply(
            rationale=f"only {stats.width}x{stats.height} pixels: details cannot be made out", quality_score=2
        )
    if stats.sharpness < 4 or stats.contrast < 18:
        return QualityReply(
            rationale=f"soft or flat (sharpness {stats.sharpness:.1f}, contrast {stats.contrast:.0f})", quality_score=2
        )
    score = 3 + (shortest >= 400) + (stats.sharpness >= 6 and stats.contrast >= 40)
    return QualityReply(
        rationale=f"{stats.width}x{stats.height}, sharpness {stats.sharpness:.1f}, contrast {stats.contrast:.0f}",
        quality_score=score,
    )


# --- image category ------------------------------------------------------------------------------


def category(stats: ImageStats) -> CategoryReply:
    """Rendered graphics are told apart by shape, ink rows, axes, colour and chrome; photos are proposed as new."""

    def reply(main: str, sub: str, proposed: str | None = None) -> CategoryReply:
        return CategoryReply(category=main, sub_category=sub, proposed_category=proposed)

    if max(stats.width, stats.height) <= 128 and stats.palette_size <= 6 and stats.flat_fraction >= 0.5:
        return reply("Brands and Products", "logo or icon")
    if stats.flat_fraction < 0.5:  # camera noise and texture: a photograph, whose subject pixels cannot name
        sub = (
            "grayscale photograph"
            if stats.grayscale
            else ("dark scene" if stats.dark_fraction > 0.5 else "colour photograph")
        )
        return reply("Others", sub, "Photographs")
    if stats.aspect > 2.0 and stats.text_row_bands >= 20:
        return reply("Receipts and Invoices", "itemised receipt")
    if stats.top_bar:
        return reply("Web Design and User Interfaces", "application screen")
    if stats.strong_colour_share >= 0.1:
        return reply("Charts and Graphs", "bar chart" if stats.axis_lines else "pie or donut chart")
    if stats.flat_fraction < 0.83 and stats.tinted_share < 0.08 and stats.text_row_bands >= 20:
        return reply("Documents and Paperwork", "table" if stats.aspect < 0.7 else "text page")
    if stats.palette_size <= 2 and stats.colourfulness < 1:
        return reply("Fine Art and Illustrations", "silhouette clip art")
    if stats.axis_lines:
        return reply("Charts and Graphs", "line or scatter plot")
    return reply("Diagrams and Schematics", "boxes and connectors")


# --- ProBench fields ------------------------------------------------------------------------------

IMAGE_FIELD_BY_CATEGORY = {  # the category heuristic's answer -> (ProBench image field, sub-field)
    "Charts and Graphs": ("Document and Text-based Images", "Charts and Graphs"),
    "Documents and Paperwork": ("Document and Text-based Images", "Scanned Documents"),
    "Receipts and Invoices": ("Document and Text-based Images", "Scanned Documents"),
    "Diagrams and Schematics": ("Engineering and Technical Drawings", "Flow Diagrams"),
    "Web Design and User Interfaces": ("Screenshots and UI Elements", "Mobile App UI"),
    "Fine Art and Illustrations": ("Graphics and Artistic Images", "Illustrations"),
    "Brands and Products": ("Graphics and Artistic Images", "Logos"),
}
TASK_FIELD_WORDS = (  # first match wins: (task field, sub-field, words that signal it)
    ("Coding", "Code Understanding", ("code", "function", "bug", "python", "program", "script")),
    (
        "Mathematics",
        "Statistics/Numerical Reasoning",
        ("calculate", "how much", "sum", "total", "average", "percent", "equation", "solve"),
    ),
    ("Creative Writing", "Storytelling", ("story", "poem", "write a", "imagine", "caption for")),
    ("Planning", "Complex Workflow Design", ("plan", "steps", "schedule", "strategy", "order")),
    ("Information Extraction", "Summarization", ("summar", "extract", "list the", "what does the", "key points")),
    ("Perception", "Counting", ("how many", "count")),
    ("Perception", "Scene Understanding", ("describe", "what is in", "what is shown", "see")),
)


def fields(stats: ImageStats, question: str | None) -> FieldReply:
    image_field, _ = IMAGE_FIELD_BY_CATEGORY.get(category(stats).category, ("Photographs", "Daily Photos"))
    task = _task_field(question)
    return FieldReply(
        image_reasoning=f"pixel statistics read as {category(stats).sub_category}",
        image_field=image_field,
        proposed_image_field=None,
        question_reasoning=None if question is None else "keyword match on the question text",
        question_field=None if question is None else task[0],
        proposed_question_field=None,
    )


def _task_field(question: str | None) -> tuple[str, str]:
    text = (question or "").casefold()
    return next(
        ((field, sub) for field, sub, words in TASK_FIELD_WORDS if any(word in text for word in words)),
        ("Knowledge", "World Knowledge"),
    )


def subfields(stats: ImageStats, question: str | None) -> SubfieldReply:
    _, image_sub = IMAGE_FIELD_BY_CATEGORY.get(category(stats).category, ("Photographs", "Daily Photos"))
    return SubfieldReply(
        image_subfield=image_sub, question_subfield=None if question is None else _task_field(question)[1]
    )


# --- persona -------------------------------------------------------------------------------------

FIRST_NAMES = (
    "Amara",
    "Bastian",
    "Chen",
    "Dalia",
    "Emeka",
    "Freya",
    "Goran",
    "Hana",
    "Ilse",
    "Jonas",
    "Kiri",
    "Leila",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sami",
    "Tove",
)
HOBBIES = (
    "restores old bicycles",
    "sings in a community choir",
    "keeps a balcony vegetable garden",
    "runs trail races",
    "collects vinyl records",
    "plays chess online",
    "bakes sourdough",
    "volunteers at a library",
    "builds model trains",
    "sketches in a travel journal",
)
LEVELS = ("is new to the subject", "has an intermediate grasp of the subject", "is an expert in the field")

ROLES: dict[str, tuple[tuple[str, str, str], ...]] = {
    # kind -> (occupation, scenario, goal)
    "chart": (
        (
            "financial analyst",
            "is preparing a quarterly review and wants a second opinion on a figure a colleague sent",
            "check the trend before a budget meeting",
        ),
        (
            "science journalist",
            "is fact-checking a graphic for an article due tonight",
            "decide whether the plot supports the headline",
        ),
    ),
    "document": (
        (
            "paralegal",
            "received a scanned page and must summarise it for a supervisor",
            "extract the obligations and dates",
        ),
        (
            "graduate student",
            "is reading an administrative letter in a second language",
            "understand what must be done and by when",
        ),
    ),
    "diagram": (
        (
            "software engineer",
            "is onboarding onto a project and found a process sketch in the wiki",
            "turn the sketch into working steps",
        ),
        (
            "operations manager",
            "is redesigning a workflow and photographed the current one",
            "find the bottleneck and propose a simpler flow",
        ),
    ),
    "ui": (
        (
            "product designer",
            "is auditing an app screen before a usability test",
            "list accessibility and layout problems",
        ),
        ("front-end developer", "must rebuild a screen from a screenshot", "plan the component structure"),
    ),
    "receipt": (
        (
            "small-business owner",
            "is reconciling expenses at the end of the month",
            "check the arithmetic and categorise the items",
        ),
    ),
    "photo": (
        (
            "secondary-school teacher",
            "is preparing a lesson around a picture",
            "build questions of growing difficulty about it",
        ),
        ("hobby photographer", "is critiquing a shot before printing it", "judge composition and plan a better take"),
    ),
}


def kind_of(reply: CategoryReply) -> str:
    return {
        "Charts and Graphs": "chart",
        "Documents and Paperwork": "document",
        "Diagrams and Schematics": "diagram",
        "Web Design and User Interfaces": "ui",
        "Receipts and Invoices": "receipt",
    }.get(reply.category, "photo")


def persona(stats: ImageStats, rng: random.Random) -> PersonaReply:
    occupation, scenario, goal = rng.choice(ROLES[kind_of(category(stats))])
    name = rng.choice(FIRST_NAMES)
    age = rng.randint(22, 67)
    character = (
        f"{name} is a {age}-year-old {occupation} who {rng.choice(HOBBIES)}. "
        f"{name} {rng.choice(LEVELS)} and prefers answers that show their reasoning."
    )
    return PersonaReply(character=character, scenario=f"{name} {scenario}.", goal=goal)


# --- conversation --------------------------------------------------------------------------------

USER_TURNS: dict[str, tuple[tuple[str, ...], ...]] = {
    # kind -> per level (perception, analysis, reasoning, creation): alternatives
    "chart": (
        (
            "Which part of this stands out first when you look at it, and why?",
            "Walk me through what is plotted here, piece by piece.",
        ),
        ("How do the groups in it compare with each other?", "Where does it change the most, and by roughly how much?"),
        ("What could explain the pattern you described, and what would you check to be sure?",),
        ("Draft three bullet points I could put on a slide about it for a non-expert audience.",),
    ),
    "document": (
        ("What kind of page is this and who seems to have written it?", "Give me the gist of it in two sentences."),
        ("Which parts of it ask something of the reader?",),
        ("If I only had ten minutes, what would be risky to skip in it, and why?",),
        ("Write a short reply to it that confirms the key points.",),
    ),
    "diagram": (
        ("What are the main pieces in this and how are they connected?",),
        ("Which path through it is the longest?", "Where do the branches in it split, and on what condition?"),
        ("Where would this process most likely get stuck in practice?",),
        ("Propose a simpler version of it and explain what you removed.",),
    ),
    "ui": (
        ("What is the purpose of this screen, judging by its layout?",),
        ("Which controls on it would a first-time user look for, and can they find them?",),
        ("What accessibility problems might it have?",),
        ("Sketch, in words, an improved layout for it and justify each change.",),
    ),
    "receipt": (
        ("What does this record, and from what kind of shop could it be?",),
        ("Do the listed amounts in it add up to the total shown?",),
        ("Which of the items would usually count as business expenses?",),
        ("Write an expense-report entry summarising it.",),
    ),
    "photo": (
        ("What catches your eye first in this, and where is it in the frame?", "Tell me what is going on in it."),
        ("How do the light and colours in it shape the mood?",),
        ("What can be inferred about when or where it was taken, and from which clues?",),
        ("Write a short caption and a three-question quiz about it for my students.",),
    ),
}
ASSISTANT_LEVEL_TEXT = (
    "Starting from what is directly visible: {facts} The most prominent elements sit where the contrast is "
    "highest, which is where a reader's eye lands first.",
    "Comparing the parts: {facts} The differences between regions of the image are what carry its message, "
    "so I compared them rather than describing each in isolation.",
    "Reasoning from these observations: {facts} Several explanations fit; the most likely one is the simplest "
    "that accounts for every visible element, and it can be checked against the details named above.",
    "Building on the earlier answers: {facts} Here is a draft that reuses the points we established, ordered "
    "from the most to the least important, so it can be adapted to your audience.",
)


def _facts(stats: ImageStats) -> str:
    colours = ", ".join(stats.dominant_colours) or "no dominant colour"
    layout = "light background with drawn elements" if stats.near_white_fraction > 0.45 else "full-frame scene"
    text = "many lines of text" if stats.text_row_bands >= 24 else "little or no text"
    return f"the image is {stats.width}x{stats.height} pixels, a {layout}, mainly {colours}, with {text}."


def informative_exchanges(stats: ImageStats, requested: int) -> int:
    """Images with little to talk about support fewer grounded questions than requested.

    Little: flat (almost no edges), a two-tone silhouette, or a uniform grey texture (no colour, no text rows,
    edges everywhere)."""
    flat = stats.edge_density < 0.01
    silhouette = stats.palette_size <= 2 and stats.colourfulness < 1
    texture = stats.grayscale and stats.text_row_bands == 0 and stats.edge_density > 0.1
    return min(requested, 2) if flat or silhouette or texture else requested


def conversation(stats: ImageStats, rng: random.Random, turns: int) -> ConversationReply:
    kind = kind_of(category(stats))
    utterances: list[Utterance] = []
    for index in range(informative_exchanges(stats, turns)):
        level = min(index, 3)
        utterances.append(Utterance(speaker="user", text=rng.choice(USER_TURNS[kind][level])))
        utterances.append(Utterance(speaker="assistant", text=ASSISTANT_LEVEL_TEXT[level].format(facts=_facts(stats))))
    return ConversationReply(utterances=utterances)


# --- ConvBench ladder ---------------------------------------------------------------------------


def ladder(stats: ImageStats, rng: random.Random, seed: str | None) -> LadderReply:
    kind = kind_of(category(stats))
    perception = seed or rng.choice(USER_TURNS[kind][0])
    return LadderReply(
        perception=perception, reasoning=rng.choice(USER_TURNS[kind][2]), creation=rng.choice(USER_TURNS[kind][3])
    )


def caption(stats: ImageStats) -> CaptionReply:
    reply = category(stats)
    kind = reply.proposed_category or reply.category
    return CaptionReply(caption=f"A {reply.sub_category} ({kind.lower()}): {_facts(stats)}")


def references(stats: ImageStats) -> ReferenceReply:
    facts = _facts(stats)
    return ReferenceReply(
        perception_answer=ASSISTANT_LEVEL_TEXT[0].format(facts=facts),
        reasoning_answer=ASSISTANT_LEVEL_TEXT[2].format(facts=facts),
        creation_answer=ASSISTANT_LEVEL_TEXT[3].format(facts=facts),
    )


def focus_points(stats: ImageStats) -> FocusPointsReply:
    colours = ", ".join(stats.dominant_colours) or "its main colours"
    return FocusPointsReply(
        points=[
            "Does the answer produce the requested piece rather than describe the image again?",
            f"Does it stay consistent with what the image shows (for example {colours})?",
            "Does it use the conclusions of the earlier turns?",
            "Is it organised so it could be used without further editing?",
        ]
    )


# --- MultiVerse goal and task labels ---------------------------------------------------------------

GOAL_TASK_BY_KIND = {
    "chart": ("Analysis", "trend interpretation", "chart analysis", "trend reading"),
    "document": ("Understanding", "document comprehension", "document understanding", "summarisation"),
    "diagram": ("Optimization", "process improvement", "diagram reasoning", "flow analysis"),
    "ui": ("Optimization", "interface improvement", "UI analysis", "layout critique"),
    "receipt": ("Calculation", "expense check", "receipt calculation", "arithmetic check"),
    "photo": ("Exploration", "scene interpretation", "image description", "scene understanding"),
}


def goal_task(stats: ImageStats) -> GoalTaskReply:
    goal, sub_goal, task, sub_task = GOAL_TASK_BY_KIND[kind_of(category(stats))]
    return GoalTaskReply(goal=goal, sub_goal=sub_goal, task=task, sub_task=sub_task)


# --- AlignMMBench: seed questions, rewrites, incoherent histories -------------------------------------

SEED_TASK_BY_KIND = {
    "chart": "Chart",
    "document": "OCR",
    "receipt": "Counting",
    "diagram": "Reasoning",
    "ui": "Recognition",
    "photo": "Description",
}
SEED_QUESTIONS = {
    "zh": {
        "Chart": "这张图表中哪一部分的数值最大？",
        "OCR": "请把图中的主要文字内容写出来。",
        "Counting": "图中一共列出了多少个条目？",
        "Reasoning": "按照图中的流程，从起点到终点要经过哪些步骤？",
        "Recognition": "这个界面的主要功能是什么？",
        "Description": "请详细描述这张图片。",
    },
    "en": {
        "Chart": "Which part of this chart has the largest value?",
        "OCR": "Write out the main text in the image.",
        "Counting": "How many entries are listed in the image?",
        "Reasoning": "Following the flow in the image, which steps lead from the start to the end?",
        "Recognition": "What is the main purpose of this screen?",
        "Description": "Describe this image in detail.",
    },
}
REWRITE_TEMPLATES = {
    "zh": ("请问，{q}", "{q}请详细回答。", "能否告诉我：{q}", "我想知道，{q}", "根据这张图片，{q}"),
    "en": (
        "Could you tell me: {q}",
        "{q} Please answer in detail.",
        "I'd like to know: {q}",
        "Looking at this image, {q}",
        "Quick question: {q}",
    ),
}


def _language_code(text: str) -> str:
    return "zh" if any("\u4e00" <= char <= "\u9fff" for char in text) else "en"


def _facts_in(language: str, stats: ImageStats) -> str:
    colours = ", ".join(stats.dominant_colours) or "-"
    if language == "zh":
        return f"图片为{stats.width}x{stats.height}像素，主要颜色：{colours}。"
    return _facts(stats)


def seed_question(stats: ImageStats, language_name: str) -> SeedQuestionReply:
    """The task's template question, led by the image's two main colours so questions differ across images."""
    language = "zh" if language_name.startswith("Chinese") else "en"
    task = SEED_TASK_BY_KIND[kind_of(category(stats))]
    colours = (list(stats.dominant_colours) + ["grey", "grey"])[:2]
    lead = (
        f"看{colours[0]}和{colours[1]}的部分："
        if language == "zh"
        else f"Looking at the {colours[0]} and {colours[1]} areas: "
    )
    return SeedQuestionReply(
        task=task, question=lead + SEED_QUESTIONS[language][task], reference_answer=_facts_in(language, stats)
    )


def paraphrases(question: str, count: int) -> ParaphraseReply:
    templates = REWRITE_TEMPLATES[_language_code(question)]
    return ParaphraseReply(rewrites=[templates[index % len(templates)].format(q=question) for index in range(count)])


def incoherence(stats: ImageStats, language_name: str) -> IncoherenceReply:
    language = "zh" if language_name.startswith("Chinese") else "en"
    task = SEED_TASK_BY_KIND[kind_of(category(stats))]
    facts = _facts_in(language, stats)
    if language == "zh":
        return IncoherenceReply(
            first_question=SEED_QUESTIONS["zh"][task],
            wrong_answer="图中是一片空白，没有任何内容。",
            what_is_wrong="图片并非空白。",
            correction_request="你刚才的回答不对，请再仔细看看图片并改正。",
            corrected_answer=f"抱歉，我之前说错了。{facts}",
        )
    return IncoherenceReply(
        first_question=SEED_QUESTIONS["en"][task],
        wrong_answer="The image is blank; it shows nothing.",
        what_is_wrong="The image is not blank.",
        correction_request="That is not right. Please look at the image again and correct it.",
        corrected_answer=f"Sorry, I was wrong. {facts}",
    )


# --- ProBench judgements ------------------------------------------------------------------------------

IMAGE_WORDS = re.compile(
    r"\b(this|these|here|image|picture|photo|chart|figure|shown|screen|diagram|page)\b|图|这张|照片", re.IGNORECASE
)
BACK_REFERENCES = re.compile(
    r"\b(it|that|those|them|previous|earlier|above|same|based on|you said)\b|刚才|上面|它", re.IGNORECASE
)
REASONING_WORDS = re.compile(
    r"\b(why|explain|calculate|compare|plan|prove|estimate|derive|design|how much)\b|为什么|计算", re.IGNORECASE
)


def _user_lines(conversation: str) -> list[str]:
    return [line[len("USER: ") :] for line in conversation.splitlines() if line.startswith("USER: ")]


def blindness(conversation: str) -> YesNoReply:
    users = _user_lines(conversation)
    pointing = [text for text in users if IMAGE_WORDS.search(text)]
    if pointing:
        return YesNoReply(reasoning=f"{len(pointing)} of {len(users)} requests point at the image", decision="NO")
    return YesNoReply(reasoning="no request refers to the image; general knowledge could answer", decision="YES")


def challenge(stats: ImageStats, conversation: str) -> ChallengeReply:
    users = _user_lines(conversation)
    words = sum(len(text.split()) for text in users)
    textual = min(10, 1 + words // 6)
    image = min(10, 2 + (stats.text_row_bands >= 20) * 3 + (stats.edge_density > 0.05) * 2 + bool(stats.axis_lines))
    reasoning = min(10, 1 + 2 * sum(len(REASONING_WORDS.findall(text)) for text in users))
    return ChallengeReply(
        textual=Dimension(explanation=f"{words} words of request over {len(users)} turn(s)", score=textual),
        image=Dimension(
            explanation=f"{stats.text_row_bands} text row bands, edge density {stats.edge_density:.2f}", score=image
        ),
        reasoning=Dimension(explanation="reasoning cue words in the requests", score=reasoning),
    )


def interdependency(conversation: str) -> YesNoReply:
    later = _user_lines(conversation)[1:]
    linked = [text for text in later if BACK_REFERENCES.search(text)]
    if linked:
        return YesNoReply(reasoning=f"{len(linked)} later request(s) refer back", decision="NO")
    return YesNoReply(reasoning="no later request refers back to an earlier turn", decision="YES")


def baseline(stats: ImageStats) -> AnswerReply:
    return AnswerReply(answer=f"From what the image shows: {_facts(stats)}")


# --- checklist -----------------------------------------------------------------------------------

CHECKLIST_BY_LEVEL = (
    (
        (
            "Perceptual Understanding",
            "visible elements",
            "Does the answer name the elements that stand out in the image?",
        ),
        (
            "Multimodal Consistency",
            "colour description",
            "Does the answer describe the main colours ({colours}) correctly?",
        ),
        (
            "Factual Correctness",
            "no invented content",
            "Does the answer avoid describing things that are not in the image?",
        ),
    ),
    (
        (
            "Cognitive Reasoning",
            "comparison",
            "Does the answer compare the parts of the image instead of listing them?",
        ),
        (
            "Specificity & Informativeness",
            "concrete detail",
            "Does the answer cite specific regions or values from the image?",
        ),
        ("Contextual Understanding", "follow-up", "Does the answer build on the previous turn without repeating it?"),
    ),
    (
        (
            "Knowledge Understanding",
            "plausible explanation",
            "Does the answer give an explanation consistent with every visible clue?",
        ),
        (
            "Problem-Solving Capability",
            "verification step",
            "Does the answer say how the explanation could be checked?",
        ),
        ("Memory", "earlier observations", "Does the answer reuse observations from the earlier turns correctly?"),
    ),
    (
        ("Creativity", "original draft", "Does the answer produce the requested new piece rather than a description?"),
        ("Instruction Following", "requested format", "Does the answer follow the format the user asked for?"),
        ("Adaptability", "audience fit", "Is the draft suited to the audience the user named?"),
    ),
)
COMMON_ITEMS = (
    ("Clarity & Logical Structure", "organisation", "Is the answer organised so each point can be followed?"),
    ("Fluency & Grammatical Accuracy", "language", "Is the answer free of grammatical errors?"),
)


def _user_turn_count(conversation_text: str) -> int:
    return len(re.findall(r"^USER:", conversation_text, flags=re.MULTILINE))


def checklist(stats: ImageStats, conversation_text: str) -> ChecklistReply:
    colours = ", ".join(stats.dominant_colours) or "none"
    result = []
    for index in range(_user_turn_count(conversation_text)):
        rows = CHECKLIST_BY_LEVEL[min(index, 3)] + COMMON_ITEMS
        result.append(
            TurnChecklist(
                user_turn=index + 1,
                items=[
                    ChecklistQuestion(question=text.format(colours=colours), main_criteria=main, sub_criteria=sub)
                    for main, sub, text in rows
                ],
            )
        )
    return ChecklistReply(checklists=result)


# --- backend -------------------------------------------------------------------------------------


def _question(request: ModelRequest) -> str | None:
    text = request.variables.get("question")
    return None if text in (None, NO_QUESTION) else text


def _answer(request: ModelRequest, stats: ImageStats) -> BaseModel:
    rng = random.Random(request.seed)
    handlers: dict[str, Callable[[], BaseModel]] = {
        "image_quality": lambda: quality(stats),
        "image_category": lambda: category(stats),
        "persona": lambda: persona(stats, rng),
        "conversation": lambda: conversation(stats, rng, int(request.variables["turns"])),
        "checklist": lambda: checklist(stats, request.variables["conversation"]),
        "field_classify": lambda: fields(stats, _question(request)),
        "ladder": lambda: ladder(
            stats,
            rng,
            None
            if request.variables["seed_instruction"].startswith("(none")
            else request.variables["seed_instruction"],
        ),
        "caption": lambda: caption(stats),
        "goal_task": lambda: goal_task(stats),
        "blindness": lambda: blindness(request.variables["conversation"]),
        "challenge": lambda: challenge(stats, request.variables["conversation"]),
        "interdependency": lambda: interdependency(request.variables["conversation"]),
        "baseline_answer": lambda: baseline(stats),
        "seed_question": lambda: seed_question(stats, request.variables["language"]),
        "paraphrase": lambda: paraphrases(request.variables["question"], int(request.variables["count"])),
        "incoherence": lambda: incoherence(stats, request.variables["language"]),
        "reference": lambda: references(stats),
        "focus_points": lambda: focus_points(stats),
        "subfield_classify": lambda: subfields(stats, _question(request)),
    }
    if request.prompt.id not in handlers:
        raise NotImplementedError(
            f"the offline backend has no heuristic for prompt '{request.prompt.id}'; "
            f"use --backend openai for this stage"
        )
    return handlers[request.prompt.id]()


class OfflineBackend:
    """Deterministic heuristics; the answer depends only on the image content, the variables and the seed."""

    label = OFFLINE_LABEL
    model = HEURISTICS_VERSION
    concurrency = 2

    def __init__(self, cache: Cache | None = None):
        self.cache = cache  # where pixel statistics are kept between stages and processes; None: memory only

    def identity(self) -> dict[str, str]:
        return backend_identity(BackendSpec())

    def check(self) -> None:
        return None

    def complete(self, request: ModelRequest) -> ModelResult:
        if not request.images:
            raise ValueError(f"the offline heuristics need an image (prompt '{request.prompt.id}')")
        image = request.images[0]
        value = _answer(request, stored_stats(image.path, image.sha256, self.cache))
        return ModelResult(
            value=request.prompt.output_schema.model_validate(value.model_dump()),
            generation=generation_for(self, request.prompt),
        )
