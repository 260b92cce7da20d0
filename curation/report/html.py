"""A run's report as a static HTML folder a curator reads instead of JSONL (`<run>/report/html/index.html`).

Read only from what the run stored: each stage's stats.json (the funnel, costs, timing, label counts),
decisions.jsonl (every drop's reason and evidence, the model and prompt version behind it), dropped.jsonl and
kept.jsonl (the items, their images, source and license), and review/record.json when people reviewed. Pages:

- index.html: the funnel (each reason links to its drops), kept items per category after each step that changed
  them, costs and timing per stage with the backend, model and prompt version, and the review (agreement per
  judgement, each reviewer's samples and agreement with the decision, the samples they differed on);
- drops-<stage>-<reason>-<page>.html: the dropped items with a thumbnail, source, license and the evidence;
- groups-<page>.html: near-duplicate groups side by side, the kept picture first;
- samples-<page>.html: the final items (conversation, checklist, references, focus points, rewrites) with filters.

Lists are split into pages of PAGE_SIZE items, so the size of a page does not grow with the run. Thumbnails are
JPEGs of at most THUMB_SIDE pixels, made once per picture (by content) in threads and kept between reports. The
folder needs no server and no network: plain HTML, one stylesheet, one small script.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from pydantic import JsonValue

from benchcurate.curation.core.decode import ImageDecodeError, decode_image
from benchcurate.curation.core.files import replacing
from benchcurate.curation.core.jsonl import read_jsonl, read_samples
from benchcurate.curation.core.parallel import ordered_map
from benchcurate.curation.engine.store import RunStore, write_json_atomic
from benchcurate.curation.report.run import LABEL_TITLES, RunReport, histograms, load_report
from benchcurate.curation.review.conversation_review import read_record
from benchcurate.schemas import Decision, Sample, StageStats
from benchcurate.schemas.review import ReviewRecord

PAGE_SIZE = 200
THUMB_SIDE = 160
THUMB_QUALITY = 70
THUMB_CHUNK = 16  # pictures per task
OFFLINE = "offline-heuristic"


# What the pages render: the run's own models (Sample, Decision, ReviewRecord, the funnel's StageStats) in these
# rows, never plain dicts, so a field the pages read that a model lacks fails here, not as a blank cell.


@dataclass(frozen=True)
class Drop:
    stage: str
    reason: str
    item: Sample  # the sample as stored
    decision: Decision  # its decision: scores, detail, backend, model, prompt


@dataclass(frozen=True)
class Group:
    kept: Sample
    dropped: list[tuple[Sample, dict[str, JsonValue]]]  # (sample, the decision's detail)


@dataclass(frozen=True)
class Shown:
    """A sample on the samples pages, with the split it is in (a release's; a run has none yet)."""

    sample: Sample
    split: str | None = None


@dataclass(frozen=True)
class FunnelRow:
    stats: StageStats
    reasons: list[tuple[str, int, str | None]]  # (reason, count, the page of its drops when it has one)
    producers: list[str]  # "backend model prompt vN"


@dataclass(frozen=True)
class Disagreement:
    sample: str
    criteria: dict[str, list[tuple[str, str]]]  # judgement or text -> [(reviewer, answer), ...]
    status: str
    adjudicated: bool
    page: str | None = None  # the samples page that shows it


@dataclass(frozen=True)
class SelectionTable:
    stage: str
    settings: dict[str, JsonValue]
    columns: list[str]
    rows: list[list]


@dataclass(frozen=True)
class LabelRow:
    label: str
    counts: list[int]


@dataclass(frozen=True)
class LabelTable:
    title: str
    steps: list[str]
    rows: list[LabelRow]
    peak: int


@dataclass
class RunView:
    report: RunReport  # (for a release, anything with the funnel's `stages`)
    drops: dict[tuple[str, str], list[Drop]] = field(default_factory=dict)
    groups: list[Group] = field(default_factory=list)
    samples: list[Shown] = field(default_factory=list)
    producers: dict[str, list[str]] = field(default_factory=dict)  # stage -> "backend model prompt vN"
    review: ReviewRecord | None = None  # a run's last review pull
    agreement: dict = field(default_factory=dict)  # kind -> AgreementFigures (a run's or a release's)
    names: dict[str, str] = field(default_factory=dict)  # item id -> its file name, for ids named in evidence


def _samples(path: Path) -> Iterable[Sample]:
    return read_samples(path) if path.exists() else iter(())


def _decisions(path: Path) -> Iterable[Decision]:
    return (Decision.model_validate(row) for row in read_jsonl(path)) if path.exists() else iter(())


def _producer(decision: Decision) -> str | None:
    if not decision.backend:
        return None
    prompt = f" prompt {decision.prompt_id} v{decision.prompt_version}" if decision.prompt_id else ""
    return f"{decision.backend} {decision.model or ''}{prompt}".strip()


def gather(run_dir: Path) -> RunView:
    """What the pages show, read from the run folder."""
    report = load_report(run_dir)
    view = RunView(report=report)
    entries = [entry for entry in RunStore(run_dir).chain() if entry.status == "done"]
    last_kept: Path | None = None
    for entry, stats in zip(entries, report.stages, strict=False):
        folder = Path(entry.output_dir)
        dropped = {sample.id: sample for sample in _samples(folder / "dropped.jsonl")}
        producers: set[str] = set()
        near: dict[str, list[tuple[str, dict]]] = defaultdict(list)
        referenced: set[str] = set()
        for decision in _decisions(folder / "decisions.jsonl"):
            made_by = _producer(decision)
            if made_by:
                producers.add(made_by)
            if decision.kept or decision.item_id not in dropped:
                continue
            reason = decision.reason or "dropped"
            view.drops.setdefault((stats.stage, reason), []).append(
                Drop(stats.stage, reason, dropped[decision.item_id], decision)
            )
            detail = decision.detail
            referenced |= {str(detail[key]) for key in REFERENCES if detail.get(key)}
            kept_id = detail.get("near_duplicate_of")
            if kept_id:
                near[str(kept_id)].append((decision.item_id, detail))
        if referenced:
            kept = {sample.id: sample for sample in _samples(folder / "kept.jsonl") if sample.id in referenced}
            view.names.update({item_id: file_name(row) for item_id, row in kept.items()})
            view.groups += [
                Group(kept[kept_id], [(dropped[item], detail) for item, detail in members])
                for kept_id, members in near.items()
                if kept_id in kept
            ]
        view.producers[stats.stage] = sorted(producers)
        last_kept = folder / "kept.jsonl"
    if report.complete and last_kept is not None:
        view.samples = [Shown(sample) for sample in _samples(last_kept)]
    view.review = read_record(run_dir)
    view.agreement = view.review.agreement if view.review else {}
    return view


def disagreements(record: ReviewRecord | None) -> list[Disagreement]:
    """Samples on which reviewers gave different answers to a judgement or typed different texts, from the
    review record, with only what they differ on (a text as "edited: ..." or "kept the draft")."""
    if record is None:
        return []
    found = []
    for sample, outcome in sorted(record.samples.items()):
        name = lambda reviewer: record.names.get(reviewer, reviewer)  # noqa: E731
        split = {
            key: [(name(who), answer) for who, answer in question.answers.items()]
            for key, question in outcome.questions.items()
            if len(set(question.answers.values())) > 1
        }
        split |= {
            key: [
                (
                    name(answer.reviewer),
                    f"edited: {text.versions[answer.reviewer]}"
                    if answer.reviewer in text.versions
                    else "kept the draft",
                )
                for answer in outcome.answers
            ]
            for key, text in outcome.texts.items()
            if len(set(text.versions.values())) > 1
        }
        if split:
            found.append(Disagreement(sample, split, outcome.status, outcome.phase == 2))
    return found


def selection_tables(stages: list[StageStats]) -> list[SelectionTable]:
    """Per stage that decided on the set as a whole (weights, quotas, sizes), its settings and a table of its
    per-label numbers beside what it kept of each label."""
    tables = []
    for stats in stages:
        summary = stats.summary or {}
        per_label = {
            name: value
            for name, value in summary.items()
            if isinstance(value, dict) and value and all(isinstance(number, (int, float)) for number in value.values())
        }
        if not per_label:
            continue
        kept = next(iter(stats.kept_by_label.values()), {}) if stats.kept_by_label else {}
        labels = sorted({label for value in per_label.values() for label in value} | set(kept))
        columns = [*per_label, *(["kept"] if kept else [])]
        rows = [
            [label, *[per_label[name].get(label, "") for name in per_label], *([kept.get(label, 0)] if kept else [])]
            for label in labels
        ]
        settings = {name: value for name, value in summary.items() if not isinstance(value, (dict, list))}
        tables.append(SelectionTable(stats.stage, settings, columns, rows))
    return tables


# --- thumbnails --------------------------------------------------------------------------------------------------


def thumb_name(item: Sample) -> str | None:
    return f"{item.images[0].sha256[:20]}.jpg" if item.images else None


def _make_thumbs(jobs: list[tuple[str, str]]) -> list[bool]:
    """(picture path, thumbnail path) -> made; a picture that cannot be decoded gets none (its page says so)."""
    made = []
    for source, target in jobs:
        try:
            picture = decode_image(Path(source), draft_side_px=THUMB_SIDE).image
        except (ImageDecodeError, OSError):
            made.append(False)
            continue
        picture.thumbnail((THUMB_SIDE, THUMB_SIDE))
        with replacing(Path(target)) as partial:  # two reports of one run at once: each its own partial
            picture.save(partial, "JPEG", quality=THUMB_QUALITY)
        made.append(True)
    return made


def make_thumbnails(items: Iterable[Sample], folder: Path, workers: int) -> set[str]:
    """Thumbnails of the items' first pictures under `folder`, made once; the names that exist."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, str] = {}
    for item in items:
        name = thumb_name(item)
        if name and not (folder / name).exists():
            wanted.setdefault(name, item.images[0].path)
    jobs = [(path, str(folder / name)) for name, path in wanted.items()]
    chunks = [jobs[start : start + THUMB_CHUNK] for start in range(0, len(jobs), THUMB_CHUNK)]
    for _ in ordered_map(_make_thumbs, chunks, "threads" if workers > 1 else "serial", workers):
        pass
    return {path.name for path in folder.glob("*.jpg")}


# --- pages -------------------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return "".join(char if char.isalnum() or char in "-_" else "-" for char in text.lower())


def drops_page(stage: str, reason: str, page: int = 1) -> str:
    return f"drops-{_slug(stage)}-{_slug(reason)}-{page}.html"


def _pages(items: list, size: int = PAGE_SIZE) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)] or [[]]


def _environment():
    import jinja2

    templates = resources.files("benchcurate.curation.report") / "templates" / "report"
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: (templates / name).read_text(encoding="utf-8")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["evidence"] = _evidence
    environment.filters["file_name"] = file_name
    environment.filters["thumb"] = thumb_name
    return environment, templates


REFERENCES = ("near_duplicate_of", "duplicate_of")  # detail fields naming another item


def file_name(item: Sample) -> str:
    """What a person recognises an item by: its file's path under the input, else its image's file name."""
    return item.provenance.source_path or (Path(item.images[0].path).name if item.images else "") or item.id


def _evidence(decision: Decision, names: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """A decision's evidence as (name, value) lines: its scores, then what its detail adds (a value the scores
    already show is not repeated), nested values flattened; an item named by id also by its file name."""
    lines: list[tuple[str, str]] = []
    names = names or {}

    def add(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                add(f"{prefix}.{key}" if prefix else str(key), inner)
            return
        if isinstance(value, float):
            text = f"{value:.4g}"
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if prefix in REFERENCES and text in names:
            text = f"{text} ({names[text]})"
        if (prefix, text) not in lines:
            lines.append((prefix, text))

    for part in (decision.scores, decision.detail):
        add("", part)
    made_by = _producer(decision)
    if made_by:
        lines.append(("by", made_by + (" (offline heuristics, not a model)" if OFFLINE in made_by else "")))
    return lines


def _label_table(report: RunReport) -> list[LabelTable]:
    tables = []
    for histogram in histograms(report):
        steps = [step for step, _ in histogram.columns]
        peak = max((count for _, counts in histogram.columns for count in counts.values()), default=1) or 1
        rows = [
            LabelRow(label, [counts.get(label, 0) for _, counts in histogram.columns]) for label in histogram.labels
        ]
        tables.append(LabelTable(LABEL_TITLES[histogram.kind], steps, rows, peak))
    return tables


def _filters(facets: list[dict[str, str]]) -> dict[str, list[str]]:
    """Each facet's values over the samples (their `_facets`), for the filters' choices."""
    values: dict[str, set[str]] = defaultdict(set)
    for found in facets:
        for name, value in found.items():
            values[name].add(value)
    return {name: sorted(found) for name, found in values.items()}


def _facets(shown: Shown) -> dict[str, str]:
    sample, challenge = shown.sample, shown.sample.challenge
    mean = (challenge.textual + challenge.image + challenge.reasoning) / 3 if challenge else None
    level = "-" if mean is None else "hard" if mean >= 7 else "medium" if mean >= 4 else "easy"
    facets = {
        "category": sample.categories.image_main or "-",
        "language": sample.language or "-",
        "difficulty": level,
        "review": sample.review.status,
    }
    return facets if shown.split is None else {**facets, "split": shown.split}


def write_html_report(run_dir: Path, workers: int = 2) -> Path:
    """Write the report folder `<run>/report/html/` and return its index.html."""
    view = gather(run_dir)
    report = view.report
    return write_site(
        run_dir / "report" / "html",
        view,
        run_id=report.config.run_id,
        recipe=report.config.recipe.name,
        backends=report.backends,
        stages=report.stages,
        total_stages=report.total_stages,
        complete=report.complete,
        waiting=report.waiting,
        workers=workers,
        what="run",
    )


def write_site(
    out: Path,
    view: RunView,
    *,
    run_id: str,
    recipe: str,
    backends: list[str],
    stages: list[StageStats],
    total_stages: int,
    complete: bool,
    waiting: str | None,
    workers: int,
    what: str,
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    shown = [drop.item for drops in view.drops.values() for drop in drops]
    shown += [group.kept for group in view.groups] + [row.sample for row in view.samples]
    thumbs = make_thumbnails(shown, out / "thumbs", workers)
    environment, templates = _environment()
    for asset in ("report.css", "report.js"):
        (out / asset).write_text((templates / asset).read_text(encoding="utf-8"), encoding="utf-8")
    common = {
        "run_id": run_id,
        "recipe": recipe,
        "backends": backends,
        "what": what,
        "offline": any(OFFLINE in backend for backend in backends),
        "thumbs": thumbs,
        "names": view.names,
        "page_size": PAGE_SIZE,
    }
    group_pages, sample_pages = _pages(view.groups), _pages(view.samples)
    linked = {(stage, reason) for stage, reason in view.drops}
    funnel = [
        FunnelRow(
            stats,
            [
                (reason, count, drops_page(stats.stage, reason) if (stats.stage, reason) in linked else None)
                for reason, count in stats.by_reason.items()
            ],
            view.producers.get(stats.stage, []),
        )
        for stats in stages
    ]
    costs = [usage.cost_usd for stats in stages for usage in stats.usage.values() if usage.calls]
    page_of = {
        row.sample.id: f"samples-{index // PAGE_SIZE + 1}.html#s-{row.sample.id}"
        for index, row in enumerate(view.samples)
    }
    pages = {
        "index.html": environment.get_template("index.html.j2").render(
            **common,
            title="Run report" if what == "run" else "Release report",
            funnel=funnel,
            complete=complete,
            waiting=waiting,
            total_stages=total_stages,
            labels=_label_table(view.report),
            review=view.review,
            agreement=view.agreement,
            selections=selection_tables(stages),
            disagreements=[replace(found, page=page_of.get(found.sample)) for found in disagreements(view.review)],
            groups=len(view.groups),
            samples=len(view.samples),
            seconds=sum(s.seconds for s in stages),
            cost=None if any(cost is None for cost in costs) else sum(costs),
        )
    }
    for (stage, reason), drops in view.drops.items():
        split = _pages(drops)
        for number, chunk in enumerate(split, start=1):
            pages[drops_page(stage, reason, number)] = environment.get_template("drops.html.j2").render(
                **common,
                title=f"{stage}: {reason}",
                stage=stage,
                reason=reason,
                drops=chunk,
                page=number,
                pages=len(split),
                total=len(drops),
                page_name=lambda n, s=stage, r=reason: drops_page(s, r, n),
            )
    for number, chunk in enumerate(group_pages, start=1):
        pages[f"groups-{number}.html"] = environment.get_template("groups.html.j2").render(
            **common,
            title="Near-duplicate groups",
            groups=chunk,
            page=number,
            pages=len(group_pages),
            total=len(view.groups),
            page_name=lambda n: f"groups-{n}.html",
        )
    facets = [_facets(sample) for sample in view.samples]
    filters = _filters(facets)
    index_rows = [
        [row.sample.id, position // PAGE_SIZE + 1, *[facets[position][name] for name in filters]]
        for position, row in enumerate(view.samples)
    ]
    (out / "samples-index.js").write_text(  # a script, not JSON: pages opened from file:// may not fetch files
        "window.SAMPLE_INDEX = "
        + json.dumps({"facets": list(filters), "rows": index_rows}, ensure_ascii=False)
        + ";\n",
        encoding="utf-8",
    )
    for number, chunk in enumerate(sample_pages, start=1):
        pages[f"samples-{number}.html"] = environment.get_template("samples.html.j2").render(
            **common,
            title="Samples",
            filters=filters,
            samples=list(
                zip([row.sample for row in chunk], facets[(number - 1) * PAGE_SIZE : number * PAGE_SIZE], strict=True)
            ),
            page=number,
            pages=len(sample_pages),
            total=len(view.samples),
            page_name=lambda n: f"samples-{n}.html",
        )
    for name, html in pages.items():
        with replacing(out / name) as partial:
            partial.write_text(html, encoding="utf-8")
    write_json_atomic(
        out / "pages.json",
        {
            "pages": sorted(pages),
            "thumbnails": len(thumbs),
            "page_size": PAGE_SIZE,
            "sample_pages": math.ceil(len(view.samples) / PAGE_SIZE),
        },
    )
    return out / "index.html"
