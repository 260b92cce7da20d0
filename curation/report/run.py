"""What a run did, read only from the stages' stats.json: the funnel (in, removed by each stage with its
reasons, out) and the label histograms (kept items per category after each step that changed them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.files import replacing
from benchcurate.curation.core.markdown import escape
from benchcurate.curation.engine.store import RunStore
from benchcurate.schemas import RunConfig, StageStats


@dataclass(frozen=True)
class RunReport:
    config: RunConfig
    stages: list[StageStats]  # the current chain, in order, as far as it got
    total_stages: int
    waiting: str | None = None  # the stage waiting for batches, and on what

    @property
    def complete(self) -> bool:
        return len(self.stages) == self.total_stages

    @property
    def backends(self) -> list[str]:
        return sorted({label for stats in self.stages for label in stats.backends})


def resolve_run_dir(run: str, out_dir: Path) -> Path:
    """`run` is a run folder or a run id under `<out>/runs/`."""
    candidate = Path(run)
    if RunStore(candidate).exists():
        return candidate.resolve()
    by_id = out_dir / "runs" / run
    if RunStore(by_id).exists():
        return by_id.resolve()
    raise UserError(
        f"no run '{run}': pass a run folder or a run id found under {out_dir / 'runs'} "
        f"(use --out if your outputs live elsewhere)"
    )


def load_report(run_dir: Path) -> RunReport:
    store = RunStore(run_dir)
    config = store.load_config()
    stages, waiting = [], None
    for entry in store.chain():
        if entry.status == "waiting":
            waiting = f"{entry.stage}: {entry.detail}"
            break
        stats_path = Path(entry.output_dir) / "stats.json"
        stages.append(StageStats.model_validate_json(stats_path.read_text(encoding="utf-8")))
    return RunReport(config=config, stages=stages, total_stages=len(config.recipe.stages), waiting=waiting)


def _reasons(stats: StageStats) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in stats.by_reason.items()) or "-"


def funnel_rows(report: RunReport) -> list[tuple[str, int, int, str, int]]:
    """(stage, in, removed, reasons, out) per stage."""
    return [(stats.stage, stats.items_in, stats.dropped, _reasons(stats), stats.kept) for stats in report.stages]


def _usage(stats: StageStats) -> tuple[str, str, str]:
    """(calls, tokens in/out, cost) of a stage's model calls, or dashes."""
    if not stats.usage:
        return "-", "-", "-"
    calls = sum(u.calls for u in stats.usage.values())
    cached = sum(u.cached_calls for u in stats.usage.values())
    tokens = f"{sum(u.input_tokens for u in stats.usage.values())}/{sum(u.output_tokens for u in stats.usage.values())}"
    costs = [u.cost_usd for u in stats.usage.values() if u.calls]
    cost = "?" if any(c is None for c in costs) else f"{sum(costs):.4f}"
    return f"{calls}+{cached} cached" if cached else str(calls), tokens, cost


def _with_usage(report: RunReport) -> bool:
    return any(stats.usage for stats in report.stages)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def funnel_markdown(report: RunReport) -> str:
    usage = _with_usage(report)
    lines = [
        "| # | stage | in | removed | % | reasons | out |"
        + (" model calls | tokens in/out | cost USD |" if usage else ""),
        "|---|---|---:|---:|---:|---|---:|" + ("---:|---:|---:|" if usage else ""),
    ]
    for number, ((stage, items_in, removed, reasons, out), stats) in enumerate(
        zip(funnel_rows(report), report.stages), start=1
    ):
        extra = "".join(f" {cell} |" for cell in _usage(stats)) if usage else ""
        lines.append(
            f"| {number} | {stage} | {items_in} | {removed} | {_share(removed, items_in)} | {reasons} | {out} |" + extra
        )
    return "\n".join(lines)


def text_table(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    """Rows as aligned lines; columns in `right` are right-aligned."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row))
        for row in rows
    ]


def funnel_text(report: RunReport) -> str:
    usage = _with_usage(report)
    rows = [
        ("#", "stage", "in", "removed", "%", "reasons", "out")
        + (("model calls", "tokens in/out", "cost USD") if usage else ())
    ]
    rows += [
        (str(number), stage, str(items_in), str(removed), _share(removed, items_in), reasons, str(out))
        + (_usage(stats) if usage else ())
        for number, ((stage, items_in, removed, reasons, out), stats) in enumerate(
            zip(funnel_rows(report), report.stages), start=1
        )
    ]
    lines = text_table(rows, right={0, 2, 3, 4, 6, 7, 8, 9})
    header = (
        f"run {report.config.run_id} (recipe {report.config.recipe.name}; backend: "
        f"{', '.join(report.backends) or report.config.recipe.backend.kind}; "
        f"{len(report.stages)}/{report.total_stages} stages done)"
    )
    footer = []
    if usage:
        costs = [u.cost_usd for stats in report.stages for u in stats.usage.values() if u.calls]
        total = "unknown (a model has no price)" if any(c is None for c in costs) else f"${sum(costs):.4f}"
        footer = [f"new model calls cost {total}; cached replies cost nothing"]
    if report.waiting:
        footer.append(f"waiting: {report.waiting}")
    return "\n".join([header, *lines, *footer])


# --- label histograms ------------------------------------------------------------------------------

LABEL_TITLES = {"image_main": "image category", "task_main": "task field"}
PLOT_MAX_LABELS = 40


@dataclass(frozen=True)
class Histogram:
    kind: str  # image_main or task_main
    columns: list[tuple[str, dict[str, int]]]  # (after which stage, kept items per label)

    @property
    def labels(self) -> list[str]:
        """Every label seen, largest first in the first column, then by later columns, then by name."""
        seen = {label for _, counts in self.columns for label in counts}
        return sorted(seen, key=lambda label: tuple(-counts.get(label, 0) for _, counts in self.columns) + (label,))

    def rows(self, limit: int | None = None) -> list[tuple[str, list[int]]]:
        labels = self.labels
        shown = [(label, [counts.get(label, 0) for _, counts in self.columns]) for label in labels[:limit]]
        if limit is not None and len(labels) > limit:
            rest = labels[limit:]
            shown.append(
                (f"({len(rest)} more)", [sum(counts.get(label, 0) for label in rest) for _, counts in self.columns])
            )
        return shown


def histograms(report: RunReport) -> list[Histogram]:
    """Per label kind: the counts after the first stage that assigned labels, then after every stage that changed
    them: each column is the 'after' of one step and the 'before' of the next; the last is what the run kept."""
    result = []
    for kind in LABEL_TITLES:
        columns: list[tuple[str, dict[str, int]]] = []
        for stats in report.stages:
            counts = stats.kept_by_label.get(kind, {})
            if (columns or counts) and (not columns or counts != columns[-1][1]):
                columns.append((stats.stage, counts))
        if columns:
            result.append(Histogram(kind=kind, columns=columns))
    return result


def histogram_markdown(histogram: Histogram, limit: int | None = None) -> str:
    header = (
        "| " + LABEL_TITLES[histogram.kind] + " | " + " | ".join(f"after {stage}" for stage, _ in histogram.columns)
    )
    lines = [header + " |", "|---|" + "---:|" * len(histogram.columns)]
    lines += [
        f"| {escape(label)} | " + " | ".join(str(count) for count in counts) + " |"
        for label, counts in histogram.rows(limit)
    ]
    lines.append("| **total** | " + " | ".join(f"**{sum(counts.values())}**" for _, counts in histogram.columns) + " |")
    return "\n".join(lines)


def histogram_text(histogram: Histogram, limit: int | None = 25) -> str:
    rows = [(LABEL_TITLES[histogram.kind], *(f"after {stage}" for stage, _ in histogram.columns))]
    rows += [(label, *(str(count) for count in counts)) for label, counts in histogram.rows(limit)]
    rows.append(("total", *(str(sum(counts.values())) for _, counts in histogram.columns)))
    return "\n".join(text_table(rows, right=set(range(1, len(rows[0])))))


def merged_labels(report: RunReport) -> list[tuple[str, str, str]]:
    """(kind, raw name, merged into) from every normalising stage's summary."""
    return [
        (kind, raw, target)
        for stats in report.stages
        for kind, entry in stats.summary.items()
        if isinstance(entry, dict) and isinstance(entry.get("merged"), dict)
        for raw, target in entry["merged"].items()
    ]


def plot_histogram(histogram: Histogram, path: Path, config_dir: Path | None = None) -> Path:
    """Small multiples, one panel per column, the same label order in each; written as PNG.

    matplotlib keeps a font cache; unless MPLCONFIGDIR says otherwise it goes to `config_dir` (the output
    folder's cache), not the user's home. A PNG already drawn from the same counts (its key in the file) is kept:
    a rerun or a resumed run does not draw again (matplotlib's import and drawing, about 0.5 s a run)."""
    import hashlib
    import json
    import os

    key = hashlib.sha256(
        json.dumps([PLOT_VERSION, histogram.kind, histogram.columns, PLOT_MAX_LABELS], sort_keys=True).encode()
    ).hexdigest()
    if _png_key(path) == key:
        return path
    if config_dir is not None:
        os.environ.setdefault("MPLCONFIGDIR", str(config_dir))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = histogram.rows(PLOT_MAX_LABELS)
    names = [label for label, _ in rows][::-1]
    panels = len(histogram.columns)
    figure, axes = plt.subplots(
        1, panels, sharey=True, squeeze=False, figsize=(2.2 + 2.6 * panels, 1.2 + 0.24 * len(names))
    )
    for column, ((stage, counts), axis) in enumerate(zip(histogram.columns, axes[0], strict=True)):
        values = [row_counts[column] for _, row_counts in rows][::-1]
        bars = axis.barh(range(len(names)), values, color="#4c72b0")
        axis.bar_label(bars, labels=[str(v) if v else "" for v in values], fontsize=7, padding=2)
        axis.set_title(f"after {stage}\n{sum(counts.values())} items", fontsize=8)
        axis.tick_params(axis="x", labelsize=7)
        axis.xaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
        axis.margins(x=0.25)
        for side in ("top", "right"):
            axis.spines[side].set_visible(False)
    axes[0][0].set_yticks(range(len(names)), names, fontsize=7)
    figure.suptitle(f"Kept items per {LABEL_TITLES[histogram.kind]}", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as partial:
        figure.savefig(partial, dpi=110, format="png", metadata={PLOT_KEY: key})
    plt.close(figure)
    return path


PLOT_VERSION = 1  # raise when plot_histogram draws differently, so kept PNGs are drawn again
PLOT_KEY = "benchcurate-counts"  # the PNG text chunk holding what a plot was drawn from


def _png_key(path: Path) -> str | None:
    """The key a PNG of ours was drawn from, or None (no file, not a PNG, no key)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.text.get(PLOT_KEY) if image.format == "PNG" else None
    except (OSError, UnidentifiedImageError):
        return None


def write_label_report(report: RunReport, run_dir: Path) -> list[Path]:
    """`<run>/report/labels_<kind>.md` and `.png` for every label kind the run assigned; the paths written."""
    folder = run_dir / "report"
    written = []
    merged = merged_labels(report)
    for histogram in histograms(report):
        text = [
            f"# Kept items per {LABEL_TITLES[histogram.kind]}, run {report.config.run_id}",
            "",
            histogram_markdown(histogram),
            "",
        ]
        kind = histogram.kind.split("_")[0]
        rows = [(raw, target) for label_kind, raw, target in merged if label_kind == kind]
        if rows:
            text += [
                "Merged names (category_normalise):",
                "",
                "| name | merged into |",
                "|---|---|",
                *(f"| {escape(raw)} | {escape(target)} |" for raw, target in rows),
                "",
            ]
        markdown = folder / f"labels_{histogram.kind}.md"
        folder.mkdir(parents=True, exist_ok=True)
        markdown.write_text("\n".join(text), encoding="utf-8")
        written.append(markdown)
        written.append(
            plot_histogram(
                histogram, folder / f"labels_{histogram.kind}.png", run_dir.parent.parent / "cache" / "matplotlib"
            )
        )
    return written
