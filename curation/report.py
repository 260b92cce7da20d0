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
    waiting: str | None = None        # the stage waiting for batches, and on what

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
    stages, waiting = [], None
    for entry in store.load_state():
        if entry["status"] == "waiting":
            waiting = f"{entry['stage']}: {entry['detail']}"
            break
        stats_path = Path(entry["output_dir"]) / "stats.json"
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
    lines = ["| # | stage | in | removed | % | reasons | out |" + (" model calls | tokens in/out | cost USD |" if usage
                                                                  else ""),
             "|---|---|---:|---:|---:|---|---:|" + ("---:|---:|---:|" if usage else "")]
    for number, ((stage, items_in, removed, reasons, out), stats) in enumerate(
            zip(funnel_rows(report), report.stages), start=1):
        extra = "".join(f" {cell} |" for cell in _usage(stats)) if usage else ""
        lines.append(f"| {number} | {stage} | {items_in} | {removed} | {_share(removed, items_in)} | {reasons} | {out} |"
                     + extra)
    return "\n".join(lines)


def funnel_text(report: RunReport) -> str:
    usage = _with_usage(report)
    rows = [("#", "stage", "in", "removed", "%", "reasons", "out") + (("model calls", "tokens in/out", "cost USD")
                                                                   if usage else ())]
    rows += [(str(number), stage, str(items_in), str(removed), _share(removed, items_in), reasons, str(out))
             + (_usage(stats) if usage else ())
             for number, ((stage, items_in, removed, reasons, out), stats) in enumerate(
                 zip(funnel_rows(report), report.stages), start=1)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    right = {0, 2, 3, 4, 6, 7, 8, 9}
    lines = ["  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row))
             for row in rows]
    header = (f"run {report.config.run_id} (recipe {report.config.recipe.name}; backend: "
              f"{', '.join(report.backends) or report.config.recipe.backend.kind}; "
              f"{len(report.stages)}/{report.total_stages} stages done)")
    footer = []
    if usage:
        costs = [u.cost_usd for stats in report.stages for u in stats.usage.values() if u.calls]
        total = "unknown (a model has no price)" if any(c is None for c in costs) else f"${sum(costs):.4f}"
        footer = [f"new model calls cost {total}; cached replies cost nothing"]
    if report.waiting:
        footer.append(f"waiting: {report.waiting}")
    return "\n".join([header, *lines, *footer])
