"""The papers' judges, without the model layer: what a judge is shown, how its reply is read, and the arithmetic
that turns verdicts into each paper's numbers (MultiVerse, ConvBench, ProBench, AlignMMBench).

Standard library only: `curate eval`'s protocols use it, and `curate export lmms-eval` copies this file beside the
task's utils.py, so a harness scores with the same reading of the same replies. A reader raises ValueError saying
what is missing; the caller asks the judge once more, then counts a failure (never a silent zero).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import statistics
from collections import defaultdict
from collections.abc import Hashable, Iterable
from typing import NamedTuple

# --- shared -------------------------------------------------------------------------------------------------------

# A number as a judge may write it, taken whole (sign, decimals, exponent) so that `1e309` or `-3` is seen as
# written and refused, rather than read as its first digit.
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)"
QUOTES = "\"'\u201c\u201d\u2018\u2019"  # straight and curly quotes around a key or a value


class _Token(str):
    """A number in a judge's JSON, kept as written."""


_DECODER = json.JSONDecoder(parse_float=_Token, parse_int=_Token, parse_constant=_Token)


def own_words(text: str) -> str:
    """The reply without markdown quotations (lines starting with `>`): what the judge quotes is not its verdict.
    Each removed line is blanked, not dropped, so positions in the text keep their order."""
    return re.sub(r"^[ \t]*>.*$", "", text, flags=re.MULTILINE)


def json_objects(text: str) -> list[tuple[int, int, dict]]:
    """Every top-level JSON object in the text as (start, end, object); an object inside another one (a verdict
    quoted in a `Reason`) is part of its parent, not a verdict of its own."""
    found, index = [], 0
    while (index := text.find("{", index)) != -1:
        try:
            value, end = _DECODER.raw_decode(text, index)
        except ValueError:
            index += 1
            continue
        if isinstance(value, dict):
            found.append((index, end, value))
        index = end
    return found


def _json_value(found: dict, names: tuple[str, ...]) -> str | None:
    """The value of the first of `names` (any case) in a JSON object, as text: a one-item list or a value in
    brackets ("[7]", as a judge may copy the format's brackets) counts as its item."""
    for key, value in found.items():
        if key.strip().lower() in names:
            while isinstance(value, list) and len(value) == 1:
                value = value[0]
            if isinstance(value, (str, _Token)) and not isinstance(value, bool):
                return str(value).strip().strip("[]").strip()
            return repr(value)
    return None


def last_verdict(text: str, pattern: re.Pattern, json_keys: tuple[str, ...] = ()) -> str | None:
    """The judge's final statement: the last well-formed verdict in its own words (quotations left out), from a
    JSON object holding one of `json_keys` or a match of `pattern`'s first group outside any JSON object."""
    text = own_words(text)
    objects = json_objects(text) if json_keys else []
    found = [(start, value) for start, _, obj in objects if (value := _json_value(obj, json_keys)) is not None]
    found += [
        (match.start(), match.group(1))
        for match in pattern.finditer(text)
        if not any(start <= match.start() < end for start, end, _ in objects)
    ]
    return max(found)[1] if found else None


def whole_grade(raw: str, low: int = 1, high: int = 10) -> int:
    """A whole number from `low` to `high` as written (7 or 7.0); a sign, an exponent, a fraction or a number
    outside the scale is unreadable, never clamped."""
    if not re.fullmatch(r"\d+(?:\.0+)?", raw) or not low <= int(float(raw)) <= high:
        raise ValueError(f"{raw!r} is not a whole number from {low} to {high}")
    return int(float(raw))


def read_grade(text: str, pattern: re.Pattern, missing: str, json_keys: tuple[str, ...] = ()) -> int:
    """A 1-10 grade from the judge's final statement (see `last_verdict`)."""
    raw = last_verdict(text, pattern, json_keys)
    if raw is None:
        raise ValueError(missing)
    return whole_grade(raw)


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def history_lines(history: Iterable[tuple[str, str]]) -> str:
    """Earlier turns as `User: ...` / `Assistant: ...` lines."""
    return "\n".join(f"{'User' if role == 'user' else 'Assistant'}: {text}" for role, text in history)


# --- a release row as questions ------------------------------------------------------------------------------------


class TurnItem(NamedTuple):
    """One question of a release row as a single-turn harness sees it: the earlier turns given as the gold history
    (MultiVerse's Oracle, ConvBench's references, ProBench's baseline answers, AlignMMBench's given history), the
    reference answer, and what the recipe's judge reads besides."""

    sample_id: str
    turn: int  # 1-based among the row's questions (AlignMMBench: 1, the seed and its rewrites share it)
    variant: int  # 0: the question as written; k: its k-th kept rewrite (AlignMMBench)
    question: str
    history: tuple[tuple[str, str], ...]  # (role, text), gold
    reference: str | None
    category: str | None
    extra: dict


def turn_items(row: dict, recipe: str) -> list[TurnItem]:
    """The row's questions in order, each with its gold history and reference."""
    category = row.get("main_task_category") or row.get("image_main_category")
    if recipe == "alignmmbench":
        return _variants(row, category)
    turns = row.get("conversation") or []
    items, history = [], []
    for k, turn in enumerate(turns):
        if turn["speaker"] != "user":
            continue
        following = turns[k + 1] if k + 1 < len(turns) and turns[k + 1]["speaker"] == "assistant" else None
        reference = turn.get("reference") or (following["utterance"] if following else None)
        extra = {name: turn[name] for name in ("checklist", "focus_points", "level", "task_category") if turn.get(name)}
        extra |= {name: row[name] for name in ("caption", "language", "track") if row.get(name)}
        items.append(
            TurnItem(row["index"], len(items) + 1, 0, turn["utterance"], tuple(history), reference, category, extra)
        )
        history += [("user", turn["utterance"])] + ([("assistant", reference)] if reference else [])
    return items


def _variants(row: dict, category: str | None) -> list[TurnItem]:
    question = next((turn for turn in row.get("conversation") or [] if turn["speaker"] == "user"), None)
    if question is None:
        return []
    history = tuple(
        ("user" if turn["speaker"] == "user" else "assistant", turn["utterance"]) for turn in row.get("history") or []
    )
    texts = [question["utterance"]] + [
        rewrite["text"] for rewrite in row.get("rewrites") or [] if rewrite.get("status") != "rejected"
    ]
    extra = {"task": row.get("sub_task_category") or question.get("task_category"), "language": row.get("language")}
    return [
        TurnItem(row["index"], 1, k, text, history, question.get("reference"), category, extra)
        for k, text in enumerate(texts)
    ]


def flattened_question(history: Iterable[tuple[str, str]], question: str) -> str:
    """A question after earlier turns, as one message, for a harness that sends one message per question."""
    earlier = history_lines(history)
    return f"Earlier in this conversation:\n{earlier}\n\nUser: {question}" if earlier else question


# --- MultiVerse (Sec. 4, App. E) -------------------------------------------------------------------------------------

MV_NO_HISTORY = "(none: this is the first turn)"
# a key in straight or curly quotes (or none), then the number, maybe in brackets or quotes: {"score": 7},
# {“score”: 7}, "score": "[7]", Score: 7/10
MV_SCORE = re.compile(
    rf"(?<![A-Za-z])[{QUOTES}]?score[{QUOTES}]?\s*[:=\uff1a]\s*[{QUOTES}\[*]*\s*({NUMBER})", re.IGNORECASE
)
# one checklist answer per line: Q1: Yes, <Q1>: <Yes>, **Q1.** No, 1) yes, - Q2 - No
MV_CHECKLIST_LINE = re.compile(
    rf"^[ \t*#\-\u2022<\[(]*Q?\s*(\d+)\s*[>\])]?[ \t*]*[:.)\-\u2013\uff1a][ \t*]*[<\[{QUOTES}]*\s*(yes|no)\b",
    re.IGNORECASE | re.MULTILINE,
)


def read_quality(text: str) -> int:
    """The 1-10 grade from the judge's last {"score": N} (also in a code fence, curly quotes or after words)."""
    return read_grade(text, MV_SCORE, 'no {"score": <1-10>} in the reply', ("score",))


CHECKLIST_KEY = re.compile(r"\s*Q?\s*(\d+)\s*", re.IGNORECASE)


def _json_answers(found: dict) -> dict[int, bool]:
    """{"Q1": "Yes", "Q2": "No"} as {1: True, 2: False}."""
    answers = {}
    for key, verdict in found.items():
        number = CHECKLIST_KEY.fullmatch(key)
        if number and isinstance(verdict, str) and verdict.strip().lower() in ("yes", "no"):
            answers[int(number.group(1))] = verdict.strip().lower() == "yes"
    return answers


def read_checklist(text: str, count: int) -> list[bool]:
    """One Yes/No per question 1..count from the judge's final block: the lines from its last `Q1: Yes` line on,
    or its last JSON object {"Q1": "Yes", ...}. Quoted lines and earlier blocks do not count, and a final block
    that leaves a question out is unreadable (never completed from an earlier one)."""
    text = own_words(text)
    objects = json_objects(text)
    blocks = [(start, answers) for start, _, found in objects if (answers := _json_answers(found))]
    lines = [
        (match.start(), int(match.group(1)), match.group(2).lower() == "yes")
        for match in MV_CHECKLIST_LINE.finditer(text)
        if not any(start <= match.start() < end for start, end, _ in objects)
    ]
    starts = [k for k, (_, number, _) in enumerate(lines) if number == 1] or ([0] if lines else [])
    if starts:
        answers: dict[int, bool] = {}
        for _, number, verdict in lines[starts[-1] :]:
            answers.setdefault(number, verdict)
        blocks.append((lines[starts[-1]][0], answers))
    final = max(blocks, key=lambda block: block[0])[1] if blocks else {}
    missing = [number for number in range(1, count + 1) if number not in final]
    if missing:
        raise ValueError(
            f"no Yes/No line for question(s) {', '.join(f'Q{n}' for n in missing)} "
            f"(one line per question, e.g. 'Q1: Yes')"
        )
    return [final[number] for number in range(1, count + 1)]


def mv_history(history: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"{role.upper()}: {text}" for role, text in history) or MV_NO_HISTORY


def mv_checklist(questions: list[str]) -> str:
    return "\n".join(f"Q{k}. {question}" for k, question in enumerate(questions, 1))


def mv_turn_scores(ticks: list[bool], quality: int) -> dict[str, float]:
    """Checklist completion (%), quality rescaled to 10-100, and their product: the turn's score (0-100)."""
    completion = sum(ticks) / len(ticks)
    return {
        "checklist_completion": round(100 * completion, 4),
        "quality": 10.0 * quality,
        "score": round(completion * 10.0 * quality, 4),
    }


# --- ConvBench (Sec. 4-5, App. E) -----------------------------------------------------------------------------------

CB_SETTINGS = {"own": 0, "perception": 1, "perception_reasoning": 2}  # leading turns given as the reference
CB_SCORE_NAMES = {
    ("own", 1): "S1",
    ("own", 2): "S2",
    ("own", 3): "S3",
    ("own", 0): "S0",
    ("perception", 2): "S^2",
    ("perception", 3): "S^3",
    ("perception", 0): "S^0",
    ("perception_reasoning", 3): "S~3",
    ("perception_reasoning", 0): "S~0",
}
CB_ORDINALS = ("first", "second", "third")
CB_LEVELS = ("perception", "reasoning", "creation")
CB_VERDICT = re.compile(
    r"Response\W{0,3}([AB])\W{0,3}is\s+(?:the\s+)?better|Final\s+Answer\s*[:\uff1a]\s*"
    r"(?:Response\s+)?\W{0,2}([AB])\b",
    re.IGNORECASE,
)
# "Rating: 7", "Rating:{7}", "Final Rating: 7", "Rating for the third turn response: 6", "Rating (1-10): [[7]]"
CB_RATING = re.compile(rf"Rating\b[^:\uff1a\n]{{0,60}}[:\uff1a]\s*[\[{{(*{QUOTES}]*\s*({NUMBER})", re.IGNORECASE)
CB_PAPER_AGREEMENT = 81.83  # ConvBench's human-judge agreement for its ChatGPT judge (CB-N L37, L224)
PB_PAPER_AGREEMENT = 79.9  # ProBench's agreement of its GPT-4o judge with 6 annotators (PB L249)


def read_cb_verdict(text: str) -> str:
    """'A' or 'B' from the last 'Overall, Response X is better.' (or 'Final Answer: X'); a tie or no verdict is
    unreadable."""
    found = [(match.start(), match.group(1) or match.group(2)) for match in CB_VERDICT.finditer(own_words(text))]
    if not found:
        raise ValueError('no "Overall, Response A is better." or "... Response B is better." (a choice is needed)')
    return found[-1][1].upper()


def read_cb_rating(text: str) -> int:
    """The whole number after the last 'Rating:' (also 'Rating: {7}', 'Rating for the first turn: 7'), 1-10."""
    return read_grade(text, CB_RATING, 'no "Rating: X" line')


def cb_transcript(questions: list[str], answers: list[str]) -> str:
    blocks = []
    for number, (question, answer) in enumerate(zip(questions, answers), 1):
        blocks += [f"### Turn {number}, user:\n{question}", f"### Turn {number}, assistant:\n{answer}"]
    return "\n\n".join(blocks)


def cb_target(turn: int) -> str:
    if turn == 0:
        return "the whole conversation"
    return f"the {CB_ORDINALS[turn - 1]} turn (the {CB_LEVELS[turn - 1]} instruction)"


def cb_focus(points: list[str], turn: int) -> str:
    """The creation turn's focus points, shown to the judge of that turn only."""
    if not points or turn != 3:
        return ""
    return (
        "\nPoints to check in the third turn's answer:\n"
        + "\n".join(f"{k}. {point}" for k, point in enumerate(points, 1))
        + "\n"
    )


def cb_evaluations(evaluations: list[tuple[int, str]], given: int) -> str:
    """The turn evaluations the whole-conversation judge reads (turns given as history were not judged)."""
    lines = [f"Turn {turn}: the reference answer was given as history; not judged." for turn in range(1, given + 1)]
    lines += [f"Turn {turn} evaluation:\n{text}" for turn, text in evaluations]
    return "\nEvaluations of the single turns, to help judge the whole conversation:\n" + "\n\n".join(lines) + "\n"


def cb_model_is_a(sample_id: str, setting: str) -> bool:
    """The drawn presentation order: is the model's conversation shown as Assistant A?"""
    return int(hashlib.sha256(f"{sample_id}\0{setting}\0order".encode()).hexdigest()[:8], 16) % 2 == 0


def cb_scores(values: Iterable[tuple[str, float]]) -> dict[str, float]:
    """S1 ... S~0 from (score name, value) pairs (100 x won, or a rating), then R2 = mean(S1, S2, S3) and
    R1 = (R2 + S0) / 2 when those exist."""
    found: dict[str, list[float]] = defaultdict(list)
    for name, value in values:
        found[name].append(value)
    scores = {name: round(mean(found[name]), 4) for name in CB_SCORE_NAMES.values() if found.get(name)}
    if all(name in scores for name in ("S1", "S2", "S3", "S0")):
        r2 = (scores["S1"] + scores["S2"] + scores["S3"]) / 3
        scores["R2"], scores["R1"] = round(r2, 4), round((r2 + scores["S0"]) / 2, 4)
    return scores


# --- ratings from pairwise battles (ProBench Sec. 2.2) -------------------------------------------------------------

ELO_SCALE = 400.0  # alpha
ELO_K = 32.0
ELO_START = 1000.0


class Battle(NamedTuple):
    """One comparison: `first` against `second`; `outcome` is first's result (1 win, 0.5 tie, 0 loss), `weight`
    how many battles it counts as."""

    first: Hashable
    second: Hashable
    outcome: float
    weight: float = 1.0


def expected(rating: float, other: float, scale: float = ELO_SCALE) -> float:
    """Probability that a player rated `rating` beats one rated `other` (ProBench prints the exponent's sign
    flipped; this is the usual form)."""
    return 1.0 / (1.0 + 10 ** ((other - rating) / scale))


def online_elo(
    battles: Iterable[Battle], k: float = ELO_K, scale: float = ELO_SCALE, start: float = ELO_START
) -> dict[Hashable, float]:
    """The classic sequential update (ProBench's equations): after each battle, r += K * (s - P(win)). A battle of
    weight w is played w times (a whole number; arena-hard-auto's way of counting a clear verdict), not once with
    w times the step. The result depends on the battles' order."""
    ratings: dict[Hashable, float] = defaultdict(lambda: start)
    for battle in battles:
        for _ in range(max(1, round(battle.weight))):
            first, second = ratings[battle.first], ratings[battle.second]
            change = k * (battle.outcome - expected(first, second, scale))
            ratings[battle.first], ratings[battle.second] = first + change, second - change
    return dict(ratings)


def two_player_rating(wins: float, anchor_wins: float, anchor_rating: float, scale: float = ELO_SCALE) -> float:
    """Bradley-Terry between two players: the odds are the ratio of (weighted) wins."""
    return anchor_rating + scale * math.log10(wins / anchor_wins)


# --- ProBench (Sec. 2.2, App. D) ------------------------------------------------------------------------------------

PB_BASELINE_RATING = 1114.0  # gpt-4o-2024-05-13 in ProBench's tables
PB_VERDICTS = {"A>>B": 2, "A>B": 1, "A=B": 0, "B>A": -1, "B>>A": -2}
PB_VERDICT = re.compile(r"\[\[\s*(A\s*>>\s*B|A\s*>\s*B|A\s*=\s*B|B\s*>\s*A|B\s*>>\s*A)\s*\]\]")
PB_ORDERS = ("model_first", "baseline_first")
PB_LANGUAGE_RULE = (
    "\n     The answer must be in the same language as the user's instruction, unless the user asked otherwise."
)
MODEL, BASELINE = "model", "baseline"
STRONG_WEIGHT = 3.0  # a clear verdict (>>) counts as three battles (arena-hard-auto; ProBench does not say)
# a verdict from the model's side (its margin) as a battle against the baseline
PB_BATTLES = {
    margin: Battle(
        MODEL, BASELINE, 0.5 if margin == 0 else float(margin > 0), STRONG_WEIGHT if abs(margin) == 2 else 1.0
    )
    for margin in (-2, -1, 0, 1, 2)
}
PB_PRIOR = 0.5  # tied battles added between the two, so a model that wins (or loses) everything has a finite rating


def read_pb_verdict(text: str) -> str:
    """The last of [[A>>B]] [[A>B]] [[A=B]] [[B>A]] [[B>>A]] in the judge's own words, spaces removed."""
    found = PB_VERDICT.findall(own_words(text))
    if not found:
        raise ValueError("no verdict label: end with exactly one of [[A>>B]] [[A>B]] [[A=B]] [[B>A]] [[B>>A]]")
    return re.sub(r"\s+", "", found[-1])


def pb_margin(verdict: str, order: str) -> int:
    """The verdict from the model's side: 2 much better ... -2 much worse."""
    margin = PB_VERDICTS[verdict]
    return margin if order == "model_first" else -margin


def pb_exchange(questions: list[str], first: list[str], second: list[str]) -> str:
    """The request and both answers, in ProBench's layout: tags per part, a <turnN> block per round."""

    def one(question: str, a: str, b: str) -> str:
        return (
            f"Instruction:\n<inst>\n{question}\n</inst>\n\nAssistant A's answer:\n<a>\n{a}\n</a>\n\n"
            f"Assistant B's answer:\n<b>\n{b}\n</b>"
        )

    if len(questions) == 1:
        return one(questions[0], first[0], second[0])
    blocks = [f"<turn{n}>\n{one(q, a, b)}\n</turn{n}>" for n, (q, a, b) in enumerate(zip(questions, first, second), 1)]
    return (
        "A conversation of several rounds; judge the two assistants over all rounds together (later "
        "instructions build on earlier answers).\n\n" + "\n\n".join(blocks)
    )


Tally = tuple[float, float, float, int]  # (model's weighted wins, baseline's, summed win shares, verdicts)


def pb_tally(margins: Iterable[int]) -> Tally:
    """A sample's verdicts as counts; a tie is half a win for each side."""
    model = baseline = share = 0.0
    count = 0
    for margin in margins:
        battle = PB_BATTLES[margin]
        model += battle.weight * battle.outcome
        baseline += battle.weight * (1.0 - battle.outcome)
        share += battle.outcome
        count += 1
    return model, baseline, share, count


def pb_bradley_terry(tallies: list[Tally]) -> float | None:
    """Bradley-Terry on the ELO scale, the baseline at 1114 (`bradley_terry` with two players)."""
    if not tallies:
        return None
    model, baseline = sum(t[0] for t in tallies), sum(t[1] for t in tallies)
    return two_player_rating(model + PB_PRIOR / 2, baseline + PB_PRIOR / 2, PB_BASELINE_RATING)


def pb_win_rate(tallies: list[Tally]) -> float | None:
    """The share of verdicts the model wins, in percent, a tie counting half."""
    verdicts = sum(t[3] for t in tallies)
    return rounded(100 * sum(t[2] for t in tallies) / verdicts) if verdicts else None


ELO_ORDERS = 200  # orders the online ELO replays the battles in (its result depends on the order)


def pb_online_elo_orders(groups: list[tuple[int, ...]], orders: int = ELO_ORDERS, seed: int = 0) -> list[float]:
    """Online ELO from 1000 each over the samples' battles, once per drawn order, shifted so the baseline is at
    1114: one rating per order."""
    drawn = [PB_BATTLES[margin] for group in groups for margin in group]
    if not drawn:
        return []
    rng, found = random.Random(seed), []
    for _ in range(orders):
        rng.shuffle(drawn)
        ratings = online_elo(drawn)
        found.append(ratings[MODEL] - ratings[BASELINE] + PB_BASELINE_RATING)
    return found


def pb_online_elo(groups: list[tuple[int, ...]], orders: int = ELO_ORDERS, seed: int = 0) -> float | None:
    """The online ELO's median over `orders` battle orders (one fixed order gives one arbitrary draw)."""
    found = pb_online_elo_orders(groups, orders, seed)
    return statistics.median(found) if found else None


PB_STYLE = ("length", "headers", "lists", "bold")  # arena-hard-auto's style features (ProBench's style control)
_HEADER = re.compile(r"^#{1,6} ", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+\.) ", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def pb_style(model_answers: list[str], baseline_answers: list[str]) -> dict[str, float]:
    """The model's answers against the baseline's on each style feature, as (model - baseline) / (model +
    baseline), from -1 to 1 (0 when both have none): words, markdown headers, list items, bold spans."""

    def counts(answers: list[str]) -> tuple[int, ...]:
        text = "\n".join(answers)
        return len(text.split()), len(_HEADER.findall(text)), len(_LIST.findall(text)), len(_BOLD.findall(text))

    return {
        name: (a - b) / (a + b) if a + b else 0.0
        for name, a, b in zip(PB_STYLE, counts(model_answers), counts(baseline_answers))
    }


# --- AlignMMBench (Sec. 4, App. E) ----------------------------------------------------------------------------------

AMB_RATING = re.compile(
    rf"(?<![A-Za-z])[{QUOTES}]?(?:Rating|评分)[{QUOTES}]?\s*[:=：]\s*[{QUOTES}\[*]*\s*({NUMBER})", re.IGNORECASE
)
# the task names of AlignMMBench's released file and of our recipe, to the judge's rule that applies
AMB_TASK_ALIASES = {
    "描述": "Description",
    "推理": "Reasoning",
    "识别": "Recognition",
    "计数": "Counting",
    "图表": "Chart",
    "对比": "Comparison",
    "创作": "Writing",
    "写作": "Writing",
    "智力": "Problem",
    "梗图": "Meme",
    "梗图理解": "Meme",
    "世界知识": "Knowledge",
    "知识": "Knowledge",
    "OCR理解": "OCR",
    "多轮对话": "Coherence",
    "连贯": "Coherence",
    "不连贯": "Incoherence",
    "对话上下文": "Coherence",
    "Dialogue Context": "Coherence",
    "Descrpition": "Description",
}
AMB_TASK_ALIASES |= {f"{name}类": task for name, task in list(AMB_TASK_ALIASES.items()) if name[0] >= "\u4e00"}


def read_amb_rating(text: str) -> int:
    """The whole-number Rating 1-10 from a reply such as {"Rating": 7, "Reason": "..."}."""
    return read_grade(
        text,
        AMB_RATING,
        'no "Rating": <1-10> in the reply (reply with {"Rating": ..., "Reason": ...})',
        ("rating", "评分"),
    )


def amb_rule(parts: dict[str, str], task: str | None) -> str:
    """The judge's rules for the question's task (its English or Chinese name), else the general ones."""
    name = (task or "").strip()
    name = AMB_TASK_ALIASES.get(name, name)
    by_lower = {key.lower(): key for key in parts}
    return parts[by_lower.get(name.lower(), "General")]


def amb_history(history: Iterable[tuple[str, str]]) -> str:
    text = history_lines(history)
    return f"Dialogue history:\n{text}\n\n" if text else ""


def amb_spread(ratings: list[float]) -> dict[str, float]:
    """How far a question's ratings over its rewrites lie apart: max - min and the standard deviation."""
    return {"range": max(ratings) - min(ratings), "stdev": statistics.pstdev(ratings)}
