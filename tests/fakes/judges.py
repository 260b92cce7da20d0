"""A world for testing `curate eval` end to end on the loopback server: models that put a marker in their answers
to a planted share of questions, and a judge that prefers marked answers, in every protocol's reply format.

The judge ranks an answer 2 when it holds the marker, 0 when it is an unmarked model answer (it starts with
"An answer"), and 1 otherwise (a reference or baseline answer): so a model wins exactly the judgments of its marked
answers, and the expected scores follow from the planted share alone.
"""

from __future__ import annotations

import hashlib
import json
import re

MARK = "[[MARK]]"
UNMARKED = "An answer"


def marked(question: str, share: float) -> bool:
    """Whether a model with this share marks its answer to `question` (a fixed draw per question text)."""
    return int(hashlib.sha256(question.strip().encode()).hexdigest()[:8], 16) / 16**8 < share


def text_of(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def rank(answer: str) -> int:
    return 2 if MARK in answer else 0 if answer.strip().startswith(UNMARKED) else 1


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0] if start in text else ""


def _turn_answer(conversation: str, turn: int | None) -> str:
    """The assistant's answer of one turn (None: all turns joined) in ConvBench's transcript layout."""
    answers = re.findall(r"### Turn (\d+), assistant:\n(.*?)(?=\n\n### Turn |\Z)", conversation, re.DOTALL)
    return "\n".join(text for number, text in answers if turn is None or int(number) == turn)


def _cb_turn(user: str) -> int | None:
    found = re.search(r"handled the (first|second|third) turn|rate the (first|second|third) turn", user)
    word = found and (found.group(1) or found.group(2))
    return {"first": 1, "second": 2, "third": 3}.get(word) if word else None


def judge_reply(body: dict, broken: bool = False) -> str:
    """The judge's reply to any of the protocols' judge prompts."""
    user = text_of(body["messages"][-1])
    if broken:
        return "I would rather not say."
    if "Assistant's answer to grade:" in user:  # MultiVerse quality
        answer = user.split("Assistant's answer to grade:\n", 1)[1]
        return json.dumps({"score": 10 if MARK in answer else 2})
    if "Assistant's answer to check:" in user:  # MultiVerse checklist
        answer = user.split("Assistant's answer to check:\n", 1)[1].split("\n\nChecklist:", 1)[0]
        count = len(re.findall(r"^Q\d+\. ", user, re.MULTILINE))
        return "\n".join(f"Q{k}: {'Yes' if MARK in answer else 'No'}" for k in range(1, count + 1))
    if "Assistant A's Conversation with User" in user:  # ConvBench pairwise
        turn = _cb_turn(user)
        a = rank(_turn_answer(_between(user, "Assistant A's Conversation with User|>", "<|The End"), turn))
        b = rank(_turn_answer(_between(user, "Assistant B's Conversation with User|>", "<|The End"), turn))
        return f"Having compared both, Overall, Response {'A' if a >= b else 'B'} is better."
    if "<|The Start of the Assistant's Conversation|>" in user:  # ConvBench direct
        mine = _turn_answer(_between(user, "Assistant's Conversation|>", "<|The End"), _cb_turn(user))
        return f"Compared with the reference. Rating: {10 if MARK in mine else 3}"
    if "<inst>" in user:  # ProBench
        a = rank("\n".join(re.findall(r"<a>\n(.*?)\n</a>", user, re.DOTALL)))
        b = rank("\n".join(re.findall(r"<b>\n(.*?)\n</b>", user, re.DOTALL)))
        label = "A>>B" if a > b else "B>>A" if b > a else "A=B"
        return f"My answer: ...\nComparison: ...\nVerdict: [[{label}]]"
    if "[Assistant's answer]" in user:  # AlignMMBench
        answer = _between(user, "[Assistant's answer]\n", "\n[End of assistant's answer]")
        return json.dumps({"Rating": 10 if MARK in answer else 2, "Reason": "比较了参考答案"}, ensure_ascii=False)
    raise ValueError(f"the fake judge does not know this prompt: {user[:200]!r}")


def model_reply(body: dict, share: float) -> str:
    """The model under test: the marker in its answer to a planted share of questions."""
    question = text_of(body["messages"][-1])
    prefix = f"Here it is {MARK}" if marked(question, share) else UNMARKED
    return f"{prefix} to: {question[:60]}"


def marker_world(shares: dict[str, float], judge: str = "judge-vlm", broken_judge: bool = False, seen=None):
    """A responder: requests to a model named in `shares` answer as model_reply with its share; to `judge` as
    judge_reply. `seen`, a list, collects every request body."""

    def respond(body: dict) -> str:
        if seen is not None:
            seen.append(body)
        if body["model"] == judge:
            return judge_reply(body, broken_judge)
        return model_reply(body, shares[body["model"]])

    return respond
