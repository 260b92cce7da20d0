"""The review page without a server: which boxes a round's config has, what a task carries, and that text from
models or people reaches the page escaped."""

from xml.etree import ElementTree

from benchcurate.annotation import page
from benchcurate.schemas import ChecklistItem, Rewrite, Turn
from tests.factories import make_sample

CHECK = ChecklistItem(question="q?", main_criteria="m", sub_criteria="s")


def names(config: str) -> set[str]:
    return {node.get("name") for node in ElementTree.fromstring(config).iter() if node.get("name")}


def test_each_round_gets_the_config_of_its_review_kinds():
    multiverse = make_sample(1, conversation=[Turn(speaker="user", utterance="u", checklist=[CHECK])])
    convbench = make_sample(2, caption="c", conversation=[Turn(speaker="user", utterance="u", reference="r")])
    alignmm = make_sample(3, rewrites=[Rewrite(text="t")], conversation=[Turn(speaker="user", utterance="u")])
    assert page.sections_for([multiverse]) == ("checklists",)
    assert page.sections_for([convbench]) == ("drafts",)
    assert page.sections_for([alignmm, convbench]) == ("rewrites", "drafts")
    plain = names(page.phase1_config(()))
    assert {"natural", "correct", "needs_image", "notes", "image", "turn_{{idx}}"} <= plain
    assert not any(name.startswith(("rewrite_", "check_", "reference_", "caption")) for name in plain)
    assert {"check_{{idx}}_{{j}}", "checkedit_{{idx}}_{{j}}", "checkadd_{{idx}}"} <= names(
        page.phase1_config(("checklists",))
    )
    assert {"caption", "reference_{{idx}}", "focus_{{idx}}"} <= names(page.phase1_config(("drafts",)))
    config = ElementTree.fromstring(page.phase1_config(()))
    keys = [choice.get("hotkey") for choices in config.iter("Choices") for choice in choices]
    assert keys == ["1", "2", "3", "4", "5", "6"]  # the three judgements; the rest from Label Studio's own pool
    assert not list(config.iter("Paragraphs"))  # no "00:00:00 - 00:00:00" on every turn


def test_a_task_carries_the_whole_dialogue_its_drafts_and_questions_about_what_it_shows():
    sample = make_sample(
        4,
        caption="A <b>cap</b>",
        history=[Turn(speaker="user", utterance="before"), Turn(speaker="assistant", utterance="wrong")],
        conversation=[
            Turn(speaker="user", utterance="<script>alert(1)</script> what?", reference="ref 1", checklist=[CHECK]),
            Turn(speaker="assistant", utterance="an answer & more"),
            Turn(speaker="user", utterance="next", focus_points=["3 dogs", "2024"]),
        ],
    )
    task = page.phase1_task(sample, "/data/x.png", 3, 12, "run drafts")
    data = task["data"]
    assert "<script>" not in str(data) and "&lt;script&gt;" in data["turns"][0]["html"]
    assert "an answer &amp; more" in data["turns"][0]["html"] and "before" in data["history"][0]["html"]
    assert [len(turn["checklist"]) for turn in data["turns"]] == [1, 0] and data["turns"][0]["add"] == [{}]
    assert data["questions"]["correct"] == "Are the reference answers correct (with your edits)?"
    assert "**Sample 3 of 12** (id `s0004`)" in data["help"] and "Checklist:" in data["help"]
    drafts = {
        region["from_name"]: (region["to_name"], region["value"]["text"]) for region in task["predictions"][0]["result"]
    }
    assert drafts == {
        "caption": ("caption_label", ["A <b>cap</b>"]),
        "reference_0": ("reference_label_0", ["ref 1"]),
        "focus_1": ("focus_label_1", ["3 dogs\n2024"]),
        "checkedit_0_0": ("item_0_0", ["q?"]),
    }
    plain = page.phase1_task(
        make_sample(5, conversation=[Turn(speaker="user", utterance="u"), Turn(speaker="assistant", utterance="a")]),
        "/x",
        1,
        1,
        "v",
    )
    assert (
        "predictions" not in plain and plain["data"]["questions"]["correct"] == "Are the assistant's answers correct?"
    )


def test_an_adjudication_task_shows_each_answer_beside_its_name_and_chooses_nothing():
    sample = make_sample(6, conversation=[Turn(speaker="user", utterance="u", reference="draft <ref>")])
    open_questions = [
        {"key": "correct", "kind": "question", "label": "Correct?", "answers": {"u-1": "yes", "u-2": "no"}},
        {
            "key": "reference_0",
            "kind": "text",
            "label": "Reference",
            "draft": "draft <ref>",
            "answers": {"u-1": "fix A", "u-2": "fix <B>"},
        },
    ]
    task = page.phase2_task(sample, "/x", open_questions, {"u-1": "ann@example.org", "u-2": "bo@example.org"}, 1, 1)
    data = task["data"]
    assert "predictions" not in task
    first, second = data["open"]
    assert "<b>ann@example.org</b>: yes" in first["html"] and "<b>bo@example.org</b>: no" in first["html"]
    assert [option["value"] for option in first["options"]] == ["no (bo@example.org)", "yes (ann@example.org)"]
    assert data["settle"][0] == {
        "key": "correct",
        "answers": {"no (bo@example.org)": "no", "yes (ann@example.org)": "yes"},
    }
    assert "fix &lt;B&gt;" in second["html"] and second["own"] == [{}]
    assert data["settle"][1]["answers"] == {"Version 1": "fix <B>", "Version 2": "fix A", "The draft": "draft <ref>"}


def test_an_annotation_is_read_against_its_sample_and_empty_boxes_keep_the_drafts():
    from benchcurate.annotation.review import parse_answers, parse_settlement
    from benchcurate.curation.review.fields import review_fields

    sample = make_sample(
        7, caption="cap", conversation=[Turn(speaker="user", utterance="u", reference="ref", checklist=[CHECK])]
    )
    fields = review_fields(sample)
    yes = [{"from_name": name, "value": {"choices": ["yes"]}} for name in ("natural", "correct", "needs_image")]
    empty = [{"from_name": name, "value": {"text": [""]}} for name in ("caption", "reference_0", "checkedit_0_0")]
    # an annotation started with "+" has empty boxes: they are no edits, and the drafts stay
    answers, problem = parse_answers(
        yes + empty + [{"from_name": "check_0_0", "value": {"choices": ["rewrite"]}}], fields, "u-1", 5
    )
    assert problem == "" and answers.texts == {} and answers.choices["check_0_0"] == "keep"
    typed, _ = parse_answers(
        yes
        + [
            {"from_name": "reference_0", "value": {"text": ["3 dogs\n2024 é"]}},
            {"from_name": "checkadd_0", "value": {"text": ["a | b | c", "d | e | f"]}},
        ],
        fields,
        "u-1",
        6,
    )
    assert typed.texts == {"reference_0": "3 dogs\n2024 é", "checkadd_0": "a | b | c\nd | e | f"}
    assert parse_answers(yes[:2], fields, "u", 1)[1] == "not answered: needs_image"
    assert (
        parse_answers(yes + [{"from_name": "reference_3", "value": {"text": ["x"]}}], fields, "u", 1)[1]
        == "reference_3: no such field in this sample"
    )
    settle = [
        {"key": "correct", "answers": {"yes (a)": "yes", "no (b)": "no"}},
        {"key": "reference_0", "answers": {"Version 1": "A", "The draft": "ref"}},
    ]
    chosen, problem = parse_settlement(
        [
            {"from_name": "settle_0", "value": {"choices": ["no (b)"]}},
            {"from_name": "settle_1", "value": {"choices": ["Version 1"]}},
            {"from_name": "own_1", "value": {"text": ["typed by the adjudicator"]}},
        ],
        settle,
        "u-3",
        9,
    )
    assert problem == "" and [(a.key, a.answer) for a in chosen] == [
        ("correct", "no"),
        ("reference_0", "typed by the adjudicator"),
    ]
    assert parse_settlement([], settle, "u-3", 9)[1] == "not answered: correct, reference_0"
