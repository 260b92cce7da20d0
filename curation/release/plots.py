"""Distribution plots of a release, written as PNGs into `plots/` and shown in the card: categories, turns per
dialogue, question and answer lengths, languages and challenge levels (each only when the samples have it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benchcurate.curation.report.statistics import length, questions_and_answers
from benchcurate.schemas import Sample


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(counts: Counter, title: str, path: Path, horizontal: bool = True) -> Path:
    plt = _figure()
    items = counts.most_common(30)
    figure, axis = plt.subplots(figsize=(7, 0.9 + 0.28 * len(items)) if horizontal else (7, 3.2))
    labels, values = [str(label) for label, _ in items], [value for _, value in items]
    if horizontal:
        bars = axis.barh(range(len(items))[::-1], values, color="#4c72b0")
        axis.set_yticks(range(len(items))[::-1], labels, fontsize=8)
    else:
        bars = axis.bar(labels, values, color="#4c72b0")
    axis.bar_label(bars, fontsize=7, padding=2)
    return _finish(plt, figure, axis, title, path)


def _histogram(values: list[int], title: str, path: Path) -> Path:
    plt = _figure()
    figure, axis = plt.subplots(figsize=(7, 3.2))
    axis.hist(values, bins=min(30, max(5, len(set(values)))), color="#4c72b0")
    return _finish(plt, figure, axis, title, path)


def _finish(plt, figure, axis, title: str, path: Path) -> Path:
    axis.set_title(title, fontsize=10)
    for side in ("top", "right"):
        axis.spines[side].set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def write_plots(samples: list[Sample], folder: Path, config_dir: Path | None = None) -> list[tuple[str, str]]:
    """(title, relative path) of each plot written under `folder/plots/`."""
    import os

    if config_dir is not None:
        os.environ.setdefault("MPLCONFIGDIR", str(config_dir))
    out = folder / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def keep(title: str, path: Path) -> None:
        written.append((title, path.relative_to(folder).as_posix()))

    categories = Counter(s.categories.image_main for s in samples if s.categories.image_main)
    if categories:
        keep("Image categories", _bars(categories, "Samples per image category", out / "image_categories.png"))
    tasks = Counter(s.categories.task_main for s in samples if s.categories.task_main)
    if tasks:
        keep("Task categories", _bars(tasks, "Samples per task category", out / "task_categories.png"))
    turns = Counter(len(questions_and_answers(s)[0]) for s in samples)
    keep(
        "Turns per dialogue",
        _bars(
            Counter({f"{k} turn(s)": v for k, v in sorted(turns.items())}),
            "Dialogues by number of user turns",
            out / "turns.png",
            horizontal=False,
        ),
    )
    questions = [length(q) for s in samples for q in questions_and_answers(s)[0]]
    answers = [length(a) for s in samples for a in questions_and_answers(s)[1]]
    if questions:
        keep(
            "Question length",
            _histogram(questions, "Question length (words; characters for zh/ja)", out / "question_length.png"),
        )
    if answers:
        keep(
            "Answer length",
            _histogram(answers, "Answer length (words; characters for zh/ja)", out / "answer_length.png"),
        )
    languages = Counter(s.language for s in samples if s.language)
    if languages:
        keep("Languages", _bars(languages, "Samples per language", out / "languages.png"))
    levels = Counter(
        (s.scores.get("challenge_rank") or {}).get("level")
        for s in samples
        if (s.scores.get("challenge_rank") or {}).get("level")
    )
    if levels:
        keep("Challenge", _bars(levels, "Samples by challenge level", out / "challenge.png", horizontal=False))
    return written
