"""What a reviewer sees in Label Studio: the labeling configs and each task's data (names from
curation/review/fields.py).

Phase 1 (every sample, `reviewers` people each): instructions for this sample on top; the image on the left,
kept in view while the page scrolls; on the right one box per user turn holding the turn, the assistant's answer
(MultiVerse) or the reference to correct (ConvBench, AlignMMBench), the focus points, and the turn's checklist
items (keep, delete or rewrite; new items in the turn's own box); the caption and the paraphrase rewrites in
boxes of their own; and last the three judgements of the whole sample (keys 1 to 6) and notes. Drafts are shown
twice: as the text of a box (read-only, so a reviewer who starts an empty annotation still sees them) and
pre-filled in its edit field from a prediction. Dialogue turns are our own escaped HTML, not Label Studio's
Paragraphs, which prints "00:00:00 - 00:00:00" on every turn when there is no audio.

Phase 2 (adjudication): the sample as above, read-only, then one box per open question: each reviewer's answer
beside their name and choices that start with none ticked (no predictions), plus a field for the final text
where two edits differ.

Keyboard: 1-6 answer the three judgements. Label Studio gives other answers keys from a fixed pool of 33, in page
order, and none once it is used up; the instructions say so.
"""

from __future__ import annotations

from html import escape

from benchcurate.curation.review.fields import CRITERIA, ReviewFields, review_fields, user_turns
from benchcurate.schemas import Sample

STYLE = """
.bc-help { font-size: 14px; line-height: 1.45; background: #f3f7ff; border-left: 4px solid #3b6fd8;
  padding: 6px 12px; margin: 0 0 10px; }
.bc-help p { margin: 0 0 4px; }
.bc-page { display: flex; gap: 18px; align-items: flex-start; }
.bc-image { flex: 0 0 380px; position: sticky; top: 0; }
.bc-body { flex: 1 1 auto; min-width: 0; }
.bc-group { border: 1px solid #d6dbe4; border-radius: 8px; padding: 8px 12px; margin: 0 0 12px; }
.bc-turn { margin: 0 0 6px; padding: 6px 10px; border-radius: 8px; background: #eef3ff; }
.bc-assistant { background: #f4f4f4; }
.bc-given { background: #fbf6e8; }
.bc-who { font-size: 12px; font-weight: 600; color: #555; text-transform: uppercase; letter-spacing: .04em; }
.bc-text { white-space: pre-wrap; font-size: 14px; line-height: 1.45; }
.bc-answers { margin: 4px 0; font-size: 14px; }
.bc-answers li { margin: 2px 0; white-space: pre-wrap; }
.bc-item { display: grid; grid-template-columns: 1fr auto; column-gap: 12px; align-items: center;
  border-top: 1px solid #eceff4; padding: 2px 0; }
.bc-item .lsf-richtext__line { font-size: 14px; }
.bc-item .lsf-choices { margin: 0; }
.bc-item div[style] { grid-column: 1 / -1; }
.bc-label { font-size: 13px; font-weight: 600; color: #333; margin-top: 6px; }
.bc-draft { font-size: 12px; color: #666; white-space: pre-wrap; max-height: 3em; overflow-y: auto; }
.bc-group .lsf-choices { margin: 2px 0 6px; }
.bc-version { white-space: pre-wrap; background: #f7f7f7; padding: 4px 8px; border-radius: 6px; display: block; }
"""

HOTKEYS = {name: (str(2 * index + 1), str(2 * index + 2)) for index, name in enumerate(CRITERIA)}


def _bubble(speaker: str, text: str, extra: str = "", who: str | None = None) -> str:
    return (
        f'<div class="bc-turn bc-{speaker} {extra}"><div class="bc-who">{escape(who or speaker)}</div>'
        f'<div class="bc-text">{escape(text)}</div></div>'
    )


def _turn_groups(sample: Sample) -> list[tuple[int, str]]:
    """(t, html) for each user turn: the turn and the assistant turns that answer it."""
    positions = user_turns(sample)
    groups = []
    for t, position in enumerate(positions):
        end = positions[t + 1] if t + 1 < len(positions) else len(sample.conversation)
        html = _bubble("user", sample.conversation[position].utterance, who=f"turn {t + 1} - user")
        html += "".join(_bubble("assistant", turn.utterance) for turn in sample.conversation[position + 1 : end])
        groups.append((t, html))
    return groups


def _draft(label: str, draft: str) -> str:
    return f'<div class="bc-label">{escape(label)}</div><div class="bc-draft">draft: {escape(draft)}</div>'


def draft_target(key: str) -> str:
    """The object a text field's box belongs to in the config (its `toName`)."""
    kind, _, rest = key.partition("_")
    return {"caption": "caption_label", "checkedit": f"item_{rest}"}.get(kind, f"{kind}_label_{rest}")


def instructions(sample: Sample, fields: ReviewFields, position: int, total: int) -> str:
    """Markdown shown on top of the sample's page: what to check and what to edit, for what this sample holds."""
    texts = {field.key.split("_")[0] for field in fields.texts}
    lines = [
        f"**Sample {position} of {total}** (id `{sample.id}`). Read it beside the image, answer the three "
        f"questions at the end (keys 1-6), Submit."
    ]
    edit = [
        name
        for key, name in (("caption", "the caption"), ("reference", "a reference"), ("focus", "the focus points"))
        if key in texts
    ]
    if edit:
        lines.append(
            f"Fix {', '.join(edit)} only where wrong: your text replaces the draft exactly as typed; a box "
            f"left alone or emptied keeps it."
        )
    if "checkedit" in texts:
        lines.append(
            "Checklist: an item left alone is kept; *delete* or *rewrite* it; add items in the turn's last "
            "box, one at a time: `question | main criterion | sub-criterion`, Enter."
        )
    if sample.rewrites:
        lines.append("Rewrites: *keep* one only if it asks exactly what the original question asks.")
    lines.append(
        "Other keys show in brackets while Label Studio's 33 last. Use **Label All Tasks** only: it never "
        "shows another reviewer's answers."
    )
    return "\n\n".join(lines)


def phase1_config(sections: tuple[str, ...]) -> str:
    """The round's config: the image, the turns, and per kind in `sections` (rewrites, drafts, checklists) its
    boxes; a sample without such content shows nothing of it (Repeaters over empty lists)."""
    drafts = "drafts" in sections
    caption = (
        (
            '    <Repeater on="$caption" indexFlag="{{c}}">\n      <View className="bc-group" idAttr="bc-caption">\n'
            '        <HyperText name="caption_label" value="$caption[{{c}}].html" inline="true" '
            'selectionEnabled="false"/>\n'
            '        <TextArea name="caption" toName="caption_label" rows="3" editable="true" maxSubmissions="1"/>\n'
            "      </View>\n    </Repeater>\n"
        )
        if drafts
        else ""
    )
    reference = (
        "".join(
            f'        <Repeater on="$turns[{{{{idx}}}}].{kind}" indexFlag="{{{{d}}}}">\n'
            f'          <HyperText name="{kind}_label_{{{{idx}}}}" value="$turns[{{{{idx}}}}].{kind}[{{{{d}}}}].html" '
            f'inline="true" selectionEnabled="false"/>\n'
            f'          <TextArea name="{kind}_{{{{idx}}}}" toName="{kind}_label_{{{{idx}}}}" rows="{rows}" editable="true" '
            f'maxSubmissions="1"/>\n        </Repeater>\n'
            for kind, rows in (("reference", 3), ("focus", 4))
        )
        if drafts
        else ""
    )
    checklist = (
        (
            '        <Repeater on="$turns[{{idx}}].checklist" indexFlag="{{j}}">\n'
            '          <View className="bc-item" idAttr="bc-check-{{idx}}-{{j}}">\n'
            '          <Text name="item_{{idx}}_{{j}}" value="$turns[{{idx}}].checklist[{{j}}].label"/>\n'
            '          <Choices name="check_{{idx}}_{{j}}" toName="item_{{idx}}_{{j}}" choice="single" '
            'showInline="true"><Choice value="delete"/><Choice value="rewrite"/></Choices>\n'
            '          <View visibleWhen="choice-selected" whenTagName="check_{{idx}}_{{j}}" '
            'whenChoiceValue="rewrite">\n'
            '            <TextArea name="checkedit_{{idx}}_{{j}}" toName="item_{{idx}}_{{j}}" rows="1" '
            'editable="true" maxSubmissions="1"/>\n          </View>\n          </View>\n        </Repeater>\n'
            '        <Repeater on="$turns[{{idx}}].add" indexFlag="{{a}}">\n'
            '          <TextArea name="checkadd_{{idx}}" toName="turn_{{idx}}" rows="1" editable="true" '
            'placeholder="A new item for this turn: question | main criterion | sub-criterion (Enter adds it)"/>\n'
            "        </Repeater>\n"
        )
        if "checklists" in sections
        else ""
    )
    rewrites = (
        (
            '    <Repeater on="$rewrites" indexFlag="{{idx}}">\n      <View className="bc-group">\n'
            '        <Text name="rewrite_text_{{idx}}" value="$rewrites[{{idx}}].label"/>\n'
            '        <Choices name="rewrite_{{idx}}" toName="rewrite_text_{{idx}}" choice="single" '
            'showInline="true" required="true"><Choice value="keep"/><Choice value="reject"/></Choices>\n'
            "      </View>\n    </Repeater>\n"
        )
        if "rewrites" in sections
        else ""
    )
    judge = "".join(
        f'      <Header value="$questions.{name}" size="5" style="font-size: 15px; margin: 8px 0 0;"/>\n'
        f'      <Choices name="{name}" toName="image" choice="single" showInline="true" required="true">'
        f'<Choice value="yes" hotkey="{HOTKEYS[name][0]}"/><Choice value="no" hotkey="{HOTKEYS[name][1]}"/>'
        f"</Choices>\n"
        for name in CRITERIA
    )
    return (
        f'<View>\n  <Style>{STYLE}</Style>\n  <Markdown value="$help" className="bc-help"/>\n'
        '  <View className="bc-page">\n'
        '  <View className="bc-image"><Image name="image" value="$image" maxWidth="380px"/></View>\n'
        '  <View className="bc-body">\n'
        '    <Repeater on="$history" indexFlag="{{h}}">\n'
        '      <HyperText name="given_{{h}}" value="$history[{{h}}].html" inline="true" selectionEnabled="false"/>\n'
        "    </Repeater>\n"
        f"{caption}"
        '    <Repeater on="$turns" indexFlag="{{idx}}">\n      <View className="bc-group" idAttr="bc-turn-{{idx}}">\n'
        '        <HyperText name="turn_{{idx}}" value="$turns[{{idx}}].html" inline="true" selectionEnabled="false"/>\n'
        f"{reference}{checklist}      </View>\n    </Repeater>\n"
        f"{rewrites}"
        '    <View className="bc-group" idAttr="bc-judge">\n      <Header value="Your judgement of the whole sample" size="4"/>\n'
        f"{judge}"
        '      <TextArea name="notes" toName="image" rows="2" editable="true" '
        'placeholder="Notes: what is wrong, if anything"/>\n    </View>\n'
        "  </View>\n  </View>\n</View>"
    )


def _sample_view(sample: Sample) -> tuple[list[dict], list[dict]]:
    """(history, turns) as task data: given earlier turns, then one entry per user turn."""
    history = (
        [
            {
                "html": "".join(
                    _bubble(turn.speaker, turn.utterance, "bc-given", f"given earlier - {turn.speaker}")
                    for turn in sample.history
                )
            }
        ]
        if sample.history
        else []
    )
    turns = []
    for t, html in _turn_groups(sample):
        turn = sample.conversation[user_turns(sample)[t]]
        turns.append(
            {
                "html": html,
                "reference": [{"html": _draft(f"Reference answer to turn {t + 1}", turn.reference)}]
                if turn.reference
                else [],
                "focus": [{"html": _draft(f"Focus points of turn {t + 1}, one per line", "\n".join(turn.focus_points))}]
                if turn.focus_points
                else [],
                "checklist": [
                    {"label": f"{j + 1}. {item.question} ({item.main_criteria} / {item.sub_criteria})"}
                    for j, item in enumerate(turn.checklist)
                ],
                "add": [{}] if turn.checklist else [],
            }
        )
    return history, turns


def phase1_task(sample: Sample, image_url: str, position: int, total: int, drafts_version: str) -> dict:
    """A task: the data the config shows, and the drafts as one prediction the reviewer accepts or edits."""
    fields = review_fields(sample)
    history, turns = _sample_view(sample)
    data = {
        "sample_id": sample.id,
        "image": image_url,
        "help": instructions(sample, fields, position, total),
        "history": history,
        "turns": turns,
        "caption": [
            {
                "html": _draft(
                    "Caption (the judge sees only this: it must hold every fact the answers need)", sample.caption
                )
            }
        ]
        if sample.caption
        else [],
        "rewrites": [
            {"label": f"Rewrite {i + 1}: does it ask exactly what the question asks? {rewrite.text}"}
            for i, rewrite in enumerate(sample.rewrites)
        ],
        "questions": {question.key: question.label for question in fields.questions if question.key in CRITERIA},
    }
    result = [
        {
            "from_name": field.key,
            "to_name": draft_target(field.key),
            "type": "textarea",
            "value": {"text": [field.draft]},
        }
        for field in fields.texts
    ]
    task = {"data": data, "meta": {"sample_id": sample.id}}
    if result:
        task["predictions"] = [{"model_version": drafts_version, "result": result}]
    return task


def sections_for(samples: list[Sample]) -> tuple[str, ...]:
    """The review kinds a round needs beyond the judgement, from what its samples hold."""
    found = {
        "rewrites": any(s.rewrites for s in samples),
        "drafts": any(s.caption or any(t.reference or t.focus_points for t in s.conversation) for s in samples),
        "checklists": any(t.checklist for s in samples for t in s.conversation),
    }
    return tuple(name for name in ("rewrites", "drafts", "checklists") if found[name])


PHASE2_CONFIG = (
    f'<View>\n  <Style>{STYLE}</Style>\n  <Markdown value="$help" className="bc-help"/>\n'
    '  <View className="bc-page">\n'
    '  <View className="bc-image"><Image name="image" value="$image" maxWidth="380px"/></View>\n'
    '  <View className="bc-body">\n'
    '    <Repeater on="$open" indexFlag="{{idx}}">\n      <View className="bc-group" idAttr="bc-open-{{idx}}">\n'
    '        <HyperText name="question_{{idx}}" value="$open[{{idx}}].html" inline="true" selectionEnabled="false"/>\n'
    '        <Choices name="settle_{{idx}}" toName="question_{{idx}}" choice="single" showInline="true" '
    'required="true" value="$open[{{idx}}].options"/>\n'
    '        <Repeater on="$open[{{idx}}].own" indexFlag="{{o}}">\n'
    '          <TextArea name="own_{{idx}}" toName="question_{{idx}}" rows="3" editable="true" '
    'placeholder="Or write the final text here: it replaces the version chosen above"/>\n'
    "        </Repeater>\n      </View>\n    </Repeater>\n"
    '    <HyperText name="sample" value="$sample_html" inline="true" selectionEnabled="false"/>\n'
    "  </View>\n  </View>\n</View>"
)


def phase2_task(
    sample: Sample, image_url: str, open_questions: list[dict], names: dict[str, str], position: int, total: int
) -> dict:
    """An adjudication task: `open_questions` are {key, label, kind: question|text, answers: {reviewer: answer},
    draft (texts)}; each option's value names the answer and whose it was, and `settle` maps it back."""
    entries, settle = [], []
    for question in open_questions:
        said = question["answers"]
        if question["kind"] == "question":
            options = sorted(set(said.values()))
            listing = "".join(
                f"<li><b>{escape(names.get(who, who))}</b>: {escape(answer)}</li>"
                for who, answer in sorted(said.items())
            )
            values = [
                f"{answer} ({', '.join(names.get(who, who) for who, given in sorted(said.items()) if given == answer)})"
                for answer in options
            ]
        else:
            versions = sorted(set(said.values()))
            options = [*versions, question["draft"]]
            listing = "".join(
                f"<li><b>Version {number}</b> by {escape(', '.join(names.get(who, who) for who, text in sorted(said.items()) if text == version))}:"
                f'<span class="bc-version">{escape(version)}</span></li>'
                for number, version in enumerate(versions, 1)
            )
            listing += f'<li><b>The draft</b>:<span class="bc-version">{escape(question["draft"])}</span></li>'
            values = [f"Version {number}" for number in range(1, len(versions) + 1)] + ["The draft"]
        entries.append(
            {
                "html": f'<div class="bc-who">to settle</div><div class="bc-text"><b>'
                f'{escape(question["label"])}</b></div><ul class="bc-answers">{listing}</ul>',
                "options": [{"value": value} for value in values],
                "own": [{}] if question["kind"] == "text" else [],
            }
        )
        settle.append({"key": question["key"], "answers": dict(zip(values, options))})
    history, turns = _sample_view(sample)
    html = "".join(entry["html"] for entry in history)
    html += f'<div class="bc-group">{_draft("Caption", sample.caption)}</div>' if sample.caption else ""
    html += "".join(
        f'<div class="bc-group">{turn["html"]}'
        f"{''.join(part['html'] for part in turn['reference'] + turn['focus'])}</div>"
        for turn in turns
    )
    help_text = (
        f"**Adjudication {position} of {total}** (id `{sample.id}`). The reviewers differ on the questions "
        f"below. Each shows every reviewer's answer beside their name; nothing is chosen for you. Choose "
        f"the answer you find right (for a text, the version, or write the final text), then Submit."
    )
    return {
        "data": {
            "sample_id": sample.id,
            "image": image_url,
            "help": help_text,
            "sample_html": html,
            "open": entries,
            "settle": settle,
        },
        "meta": {"sample_id": sample.id, "phase": 2},
    }
