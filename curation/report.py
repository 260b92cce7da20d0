"""The funnel, read only from the stages' stats.json: in, removed by each stage with its reasons, out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curation.errors import UserError
from curation.runner import RunStore
from schemas import RunConfig, StageStats


@dataclass(frozen=True)
class RunReport:
    config: RunConfig
    stages: list[StageStats]          # the current chain, in order, as far as it got
    total_stages: int

    @property
    def complete(self) -> bool:
        return len(self.stages) == self.total_stages

    @property
    def backends(self) -> list[str]:
        return sorted({label for stats in self.stages for label in stats.backends})


def resolve_run_dir(run: str, out_dir: Path) -> Path:
    """`run` is a run folder or a run id under `<out>/runs/`."""
    candidate = Path(run)
    if (candidate / "run.json").exists():
        return candidate.resolve()
    by_id = out_dir / "runs" / run
    if (by_id / "run.json").exists():
        return by_id.resolve()
    raise UserError(f"no run '{run}': pass a run folder or a run id found under {out_dir / 'runs'} "
                    f"(use --out if your outputs live elsewhere)")


def load_report(run_dir: Path) -> RunReport:
    store = RunStore(run_dir)
    config = store.load_config()
    stages = []
    for entry in store.load_state():
        stats_path = Path(entry["output_dir"]) / "stats.json"
        stages.append(StageStats.model_validate_json(stats_path.read_text(encoding="utf-8")))
    return RunReport(config=config, stages=stages, total_stages=len(config.recipe.stages))


def _reasons(stats: StageStats) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in stats.by_reason.items()) or "-"


def funnel_rows(report: RunReport) -> list[tuple[str, int, int, str, int]]:
    """(stage, in, removed, reasons, out) per stage."""
    return [(stats.stage, stats.items_in, stats.dropped, _reasons(stats), stats.kept) for stats in report.stages]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def funnel_markdown(report: RunReport) -> str:
    lines = ["| # | stage | in | removed | % | reasons | out |", "|---|---|---:|---:|---:|---|---:|"]
    for number, (stage, items_in, removed, reasons, out) in enumerate(funnel_rows(report), start=1):
        lines.append(f"| {number} | {stage} | {items_in} | {removed} | {_share(removed, items_in)} | {reasons} | {out} |")
    return "\n".join(lines)


def funnel_text(report: RunReport) -> str:
    rows = [("#", "stage", "in", "removed", "%", "reasons", "out")]
    rows += [(str(number), stage, str(items_in), str(removed), _share(removed, items_in), reasons, str(out))
             for number, (stage, items_in, removed, reasons, out) in enumerate(funnel_rows(report), start=1)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    right = {0, 2, 3, 4, 6}
    lines = ["  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row))
             for row in rows]
    header = (f"run {report.config.run_id} (recipe {report.config.recipe.name}; backend: "
              f"{', '.join(report.backends) or report.config.recipe.backend.kind}; "
              f"{len(report.stages)}/{report.total_stages} stages done)")
    return "\n".join([header, *lines])
