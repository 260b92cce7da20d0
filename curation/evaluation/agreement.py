"""The judge against people: the judge's calls of an eval as items a person can make the same call on, and the
agreement between the judge and the people who did (`curate eval review push|pull`, `curate eval agreement`).

A person sees what the judge was shown (the request's text, and the image when the judge saw it) and answers on
the judge's own scale, coarsened where the judge's is fine-grained:
- multiverse: the quality grade in MultiVerse's rubric bands (1-2, 3-4, 5-6, 7-8, 9-10);
- convbench: which conversation handles the turn better (A or B, in the order the judge saw), or with
  `--grading direct` the rating in the same bands;
- probench: ProBench's five verdicts (A>>B ... B>>A, in the judge's order);
- alignmmbench: the rating in AlignMMBench's fuzzy bins (1-2, 3-5, 6-8, 9-10; its Table 2).
Agreement: percent agreement and Cohen's kappa between the judge and the people's majority per item (ties left
out), and between the judge and every single human label; the papers' own human-judge figures beside them.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.evaluation.engine import read_judgments, read_results
from benchcurate.curation.evaluation.judging import CB_PAPER_AGREEMENT, PB_PAPER_AGREEMENT
from benchcurate.curation.evaluation.statistics import agreement

REVIEW_DIR = "review"  # under a results folder: the Label Studio round's state, its images, the labels pulled
LABELS = "labels.jsonl"
MV_BANDS = ((1, 2), (3, 4), (5, 6), (7, 8), (9, 10))
AMB_BINS = ((1, 2), (3, 5), (6, 8), (9, 10))
PB_SCALE = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
# the papers' human-judge agreement, for comparison
PAPER_AGREEMENT = {
    "convbench": ("ConvBench, ChatGPT judge against people", CB_PAPER_AGREEMENT),
    "probench": ("ProBench, GPT-4o judge against 6 annotators", PB_PAPER_AGREEMENT),
}


def band(value: int, bands: tuple[tuple[int, int], ...]) -> str:
    return next(f"{low}-{high}" for low, high in bands if low <= value <= high)


@dataclass(frozen=True)
class JudgeItem:
    """One judge call a person can redo: its id, what the judge was shown, the scale and the judge's label."""

    item_id: str  # <sample id>|<setting>|<turn>|<call>
    sample_id: str
    call: str
    shown: str
    with_image: bool
    scale: tuple[str, ...]
    judge_label: str


SCALES = {
    ("multiverse", "quality"): tuple(f"{a}-{b}" for a, b in MV_BANDS),
    ("convbench", "pairwise"): ("A", "B"),
    ("convbench", "direct"): tuple(f"{a}-{b}" for a, b in MV_BANDS),
    ("probench", "pairwise"): PB_SCALE,
    ("alignmmbench", "rating"): tuple(f"{a}-{b}" for a, b in AMB_BINS),
}
VISION = {"multiverse", "probench"}  # recipes whose judge sees the image


def judge_label(recipe: str, call: str, read: object) -> str:
    if (recipe, call) in (("multiverse", "quality"), ("convbench", "direct")):
        return band(int(read), MV_BANDS)
    if recipe == "alignmmbench":
        return band(int(read), AMB_BINS)
    return str(read)


def judge_items(results_folder: Path) -> tuple[str, list[JudgeItem]]:
    """(recipe, every scored judge call of the eval that a person can redo)."""
    recipe = read_results(results_folder).recipe
    items = []
    for judgment in read_judgments(results_folder):
        if judgment.failure:
            continue
        for call, entry in judgment.judge.items():
            scale = SCALES.get((recipe, call))
            if scale is None or entry.get("shown") is None:
                continue
            items.append(
                JudgeItem(
                    f"{judgment.sample_id}|{judgment.setting}|{judgment.turn}|{call}",
                    judgment.sample_id,
                    call,
                    str(entry["shown"]),
                    recipe in VISION,
                    scale,
                    judge_label(recipe, call, entry["read"]),
                )
            )
    return recipe, items


def agreement_report(results_folder: Path, labels: list[dict]) -> dict:
    """Judge against people, from human labels {item_id, reviewer, label}."""
    recipe, items = judge_items(results_folder)
    judged = {item.item_id: item.judge_label for item in items}
    people: dict[str, list[str]] = defaultdict(list)
    for entry in labels:
        if entry["item_id"] in judged:
            people[entry["item_id"]].append(entry["label"])
    if not people:
        raise UserError(
            f"no human label matches a judge call of {results_folder}; push the judge's calls with "
            f"`curate eval review push {results_folder}`, annotate, then `curate eval review pull`"
        )
    majority = {}
    for item_id, found in people.items():
        ranked = Counter(found).most_common()
        if len(ranked) == 1 or ranked[0][1] > ranked[1][1]:
            majority[item_id] = ranked[0][0]
    report = {
        "recipe": recipe,
        "items_judged": len(judged),
        "items_with_human_labels": len(people),
        "human_labels": sum(map(len, people.values())),
        "reviewers": len({entry["reviewer"] for entry in labels if entry["item_id"] in judged}),
        "judge_vs_majority": agreement([(judged[item], label) for item, label in sorted(majority.items())]),
        "judge_vs_each_label": agreement(
            [(judged[item], label) for item, found in sorted(people.items()) for label in found]
        ),
        "scale": list(items[0].scale) if items else [],
    }
    if recipe in PAPER_AGREEMENT:
        report["paper"] = {"what": PAPER_AGREEMENT[recipe][0], "percent_agreement": PAPER_AGREEMENT[recipe][1]}
    return report


def read_labels(folder: Path) -> list[dict]:
    """Human labels pulled into `folder` (a results folder, or wherever `review/labels.jsonl` was pulled to)."""
    path = folder / REVIEW_DIR / LABELS
    if not path.is_file():
        raise UserError(
            f"no human labels at {path}; run `curate eval review push` and `curate eval review pull` "
            f"on the results folder first"
        )
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def agreement_text(report: dict) -> str:
    majority, each = report["judge_vs_majority"], report["judge_vs_each_label"]
    lines = [
        (
            f"judge against people ({report['recipe']}): {report['items_with_human_labels']} of "
            f"{report['items_judged']} judge calls labelled by {report['reviewers']} reviewer(s), "
            f"{report['human_labels']} labels, scale {' / '.join(report['scale'])}"
        ),
        (
            f"  judge vs the people's majority: {majority['percent_agreement']}% agreement, Cohen's kappa "
            f"{majority['cohen_kappa']} ({majority['items']} items without a tie)"
        ),
        (
            f"  judge vs every human label:     {each['percent_agreement']}% agreement, Cohen's kappa "
            f"{each['cohen_kappa']} ({each['items']} labels)"
        ),
    ]
    if "paper" in report:
        lines.append(f"  for comparison, {report['paper']['what']}: {report['paper']['percent_agreement']}%")
    return "\n".join(lines)
