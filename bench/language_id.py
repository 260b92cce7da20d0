"""Language identification accuracy on a labelled sample we wrote (bench/data/language_sample.jsonl, CC0): the
same ten requests about images in eleven languages (en, fr, de, es, pt, it, nl, ru, zh, ja, ko), short and long.

- naive: `langdetect.detect(text)` as people call it (unseeded, its own codes such as zh-cn, no length floor);
- ours: `curation.text.language.detect` (seeded, script rules for zh/ja/ko, ISO 639-1, 'unknown' below 6 letters).

Accuracy counts an answer right when it equals the label (for the naive way after mapping zh-cn/zh-tw to zh, so
the comparison is about identification, not code format); 'unknown' counts as wrong. Each way runs 3 times to
show whether answers change between runs.

    cd /work/main && .venv/bin/python bench/language_id.py [--quick]
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported

from benchcurate.curation.text.language import detect

SAMPLE = Path(__file__).resolve().parent / "data" / "language_sample.jsonl"


def naive(text: str) -> str:
    from langdetect import detect as langdetect_detect
    from langdetect.lang_detect_exception import LangDetectException

    try:
        return langdetect_detect(text).split("-")[0]
    except LangDetectException:
        return "unknown"


def main() -> None:
    args = common.arguments(__doc__, "the same sample (it takes seconds)").parse_args()
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    results = {}
    for name, function in (("naive", naive), ("ours", lambda text: detect(text)[0])):
        runs = [[function(row["text"]) for row in rows] for _ in range(3)]
        stable = sum(len({run[i] for run in runs}) == 1 for i in range(len(rows)))
        answers = runs[0]
        per_language = defaultdict(lambda: [0, 0])
        short = [0, 0]
        for row, answer in zip(rows, answers):
            per_language[row["language"]][0] += answer == row["language"]
            per_language[row["language"]][1] += 1
            if len(row["text"].split()) <= 4 and row["language"] not in ("zh", "ja"):
                short[0] += answer == row["language"]
                short[1] += 1
        correct = sum(answer == row["language"] for row, answer in zip(rows, answers))
        results[name] = {
            "accuracy": correct / len(rows),
            "correct": correct,
            "stable_across_runs": stable,
            "per_language": {lang: hits / total for lang, (hits, total) in sorted(per_language.items())},
            "short_texts_accuracy": short[0] / short[1] if short[1] else None,
            "wrong": [
                [row["language"], answer, row["text"]]
                for row, answer in zip(rows, answers)
                if answer != row["language"]
            ],
        }
    languages = sorted(results["ours"]["per_language"])
    text, markdown = common.table(
        ["way", "accuracy", "short texts (<= 4 words)", "same answer in 3 runs", *languages],
        [
            [
                name,
                r["accuracy"],
                r["short_texts_accuracy"],
                f"{r['stable_across_runs']} / {len(rows)}",
                *(r["per_language"][lang] for lang in languages),
            ]
            for name, r in results.items()
        ],
    )
    wrong = "\n".join(f"- {label} -> {answer}: {sample}" for label, answer, sample in results["ours"]["wrong"])
    summary = (
        f"{len(rows)} texts in {len(languages)} languages. Ours: {results['ours']['accuracy']:.1%} "
        f"vs naive {results['naive']['accuracy']:.1%}."
    )
    print(text + "\n\n" + summary + "\n\nours wrong:\n" + wrong)
    markdown = "\n\n".join(
        [
            "# Language identification",
            common.machine_line(common.machine()),
            markdown,
            summary,
            "Ours got wrong:\n\n" + (wrong or "- nothing"),
        ]
    )
    common.publish("language_id", {"benchmark": "language_id", "texts": len(rows), **results}, markdown, args.quick)


if __name__ == "__main__":
    main()
