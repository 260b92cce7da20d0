"""The dataset card (README.md): YAML metadata the Hugging Face Hub reads, then how the release was built."""

from __future__ import annotations

from collections import Counter

import yaml
from datasets import DatasetInfo, SplitDict, SplitInfo
from datasets.info import DatasetInfosDict

from benchcurate.curation.core.markdown import escape
from benchcurate.curation.release.columns import SCHEMA_DOC, column_table, features
from benchcurate.curation.report.run import RunReport, funnel_markdown
from benchcurate.curation.report.statistics import statistics_markdown
from benchcurate.schemas import ReleaseManifest, ReleaseSpec, Sample

HUB_LICENSE_IDS = {
    "CC0-1.0": "cc0-1.0",
    "CC-BY-4.0": "cc-by-4.0",
    "CC-BY-SA-4.0": "cc-by-sa-4.0",
    "CC-BY-NC-4.0": "cc-by-nc-4.0",
    "CC-BY-NC-SA-4.0": "cc-by-nc-sa-4.0",
    "Apache-2.0": "apache-2.0",
    "MIT": "mit",
}


SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
    (10_000_000_000, "1B<n<10B"),
    (100_000_000_000, "10B<n<100B"),
    (1_000_000_000_000, "100B<n<1T"),
)  # the Hub's size_categories


def _size_category(count: int) -> str:
    return next((label for limit, label in SIZE_CATEGORIES if count < limit), "n>1T")


def license_metadata(licenses: dict[str, int], text_licenses: dict[str, int] | None = None) -> dict:
    """The Hub's license fields: one Hub license id when the pictures and the text are all under it, else
    `other` with the per-source terms in LICENSE.md."""
    every = set(licenses) | set(text_licenses or {})
    if len(every) == 1:
        only = next(iter(every))
        if only in HUB_LICENSE_IDS:
            return {"license": HUB_LICENSE_IDS[only]}
    return {
        "license": "other",
        "license_name": "mixed-source-terms",
        "license_link": LICENSE_FILE,
        "license_details": "Pictures and text keep their sources' terms; see the per-source table in this card.",
    }


LICENSE_FILE = "LICENSE.md"


def render_license(manifest: ReleaseManifest, samples: list[Sample]) -> str:
    """LICENSE.md, which `license_link` names when no single license covers the release: each source's terms."""
    return (
        f"# Terms of {escape(manifest.name)} {manifest.version}\n\nNo single license covers this release: each "
        f"sample's picture stays under its source's terms (column `image_license`) and its text under the "
        f"terms in `text_license` (and `attribution` where a license asks for credit).\n\n"
        f"{_source_table(samples)}\n\n{_terms_text(manifest)}\n"
    )


def _metadata(manifest: ReleaseManifest, spec: ReleaseSpec, config_name: str, files: dict, languages: list[str]) -> str:
    """The Hub's YAML: license, tasks, sizes, one config with a data_files entry per split, and `dataset_info`
    (the features and each split's size), which `datasets` also reads: it loads the columns with these
    features and checks each split's row count against them."""
    meta = {
        **license_metadata(manifest.licenses, manifest.text_licenses),
        "pretty_name": spec.pretty_name,
        "task_categories": spec.task_categories,
        "language": languages,
        "size_categories": [_size_category(manifest.sample_count)],
        "configs": [
            {
                "config_name": config_name,
                "data_files": [{"split": name, "path": f"data/{name}-*.parquet"} for name in files],
            }
        ],
    }
    splits = SplitDict(
        {
            name: SplitInfo(name=name, num_bytes=entry.arrow_bytes, num_examples=entry.rows)
            for name, entry in files.items()
        }
    )
    info = DatasetInfo(
        features=features(manifest.recipe),
        splits=splits,
        download_size=sum(path.stat().st_size for entry in files.values() for path in entry.paths),
        dataset_size=sum(entry.arrow_bytes for entry in files.values()),
    )
    DatasetInfosDict({config_name: info}).to_dataset_card_data(meta)
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)


def _terms_text(manifest: ReleaseManifest) -> str:
    terms = manifest.license_terms or {}
    lines = [
        f"Terms the release carries from its sources: {escape(terms.get('summary', 'unknown'))}. A sample's "
        f"picture keeps its source's license (column `image_license`) and its text its own (column "
        f"`text_license`); they often differ: a benchmark's license covers its annotations, not the pictures "
        f"it took from elsewhere."
    ]
    unknown = [
        part
        for part, counts in (("pictures", manifest.licenses), ("text", manifest.text_licenses))
        if "unknown" in counts
    ]
    if unknown:
        lines += [
            "",
            f"**Unknown license** of the {' and the '.join(unknown)} of some samples: nobody stated "
            f"their terms, so this release cannot; find them out before you redistribute or use it.",
        ]
    if terms.get("conflicts"):
        lines += [
            "",
            "**License conflicts** (no single license covers the whole release; use each sample under its own terms):",
            "",
            *(f"- {escape(conflict)}" for conflict in terms["conflicts"]),
        ]
    return "\n".join(lines)


def _source_table(samples: list[Sample]) -> str:
    rows = Counter((s.provenance.source_dataset, s.provenance.license, s.provenance.text_license) for s in samples)
    lines = ["| source | pictures' license | text's license | samples |", "|---|---|---|---:|"]
    lines += [
        f"| {escape(source)} | {escape(picture)} | {escape(text)} | {count} |"
        for (source, picture, text), count in sorted(rows.items())
    ]
    return "\n".join(lines)


def _languages(samples: list[Sample]) -> list[str]:
    """The samples' languages (set by language routing or an importer); English where none was recorded, as the
    recipes' prompts are written in English."""
    return sorted({sample.language for sample in samples if sample.language}) or ["en"]


def _splits_text(manifest: ReleaseManifest) -> str:
    text = ", ".join(f"`{name}` {count}" for name, count in manifest.splits.items())
    if len(manifest.splits) == 1:
        return f"one split: {text}"
    fractions = ", ".join(f"{name} {fraction:g}" for name, fraction in manifest.split_fractions.items())
    return (
        f"splits {text}; drawn with fractions {fractions} from a hash of each sample's id, so a sample stays in "
        f"its split in every later version"
    )


def _limits(manifest: ReleaseManifest) -> str:
    limits = []
    if manifest.offline_outputs:
        limits.append(
            "Generated fields come from deterministic offline heuristics (see the notice above); they "
            "are placeholders for model output, not benchmark content."
        )
    if "auto" in manifest.review_modes:
        limits.append("Review mode `auto`: no person checked these samples.")
    if manifest.license_terms.get("conflicts"):
        limits.append("The sources' licenses conflict; no single license covers the release.")
    if manifest.total_cost_usd is None:
        limits.append("The cost of the model calls is unknown (a model without a price was used).")
    limits.append("Statistics and plots describe this version only; compare versions with `curate release diff`.")
    return "\n".join(f"- {limit}" for limit in limits)


def _backend_notice(manifest: ReleaseManifest) -> str:
    if not manifest.offline_outputs:
        return (
            f"Generated fields come from: {', '.join(map(escape, manifest.models))} ({', '.join(manifest.backends)})."
        )
    return (
        "**Offline heuristic outputs.** Scores, categories, personas, conversations and checklists in this "
        "release were produced by the built-in `offline-heuristic` backend (deterministic rules over pixel "
        "statistics and templates), not by a language or vision model. They exercise the pipeline; they are "
        "not benchmark content. Rerun with `--backend openai` for model-written content."
    )


def _review_figures(manifest: ReleaseManifest) -> str:
    """The human review in one sentence: people per sample, adjudications, agreement (kappa only where defined)."""
    if manifest.review is None:
        return ""
    figures = "; ".join(
        f"{kind} {'-' if value.percent is None else f'{value.percent:.0%}'} agreement, kappa "
        f"{value.kappa_undefined or '-' if value.fleiss_kappa is None else f'{value.fleiss_kappa:.2f}'}"
        for kind, value in manifest.review.agreement.items()
    )
    return (
        f" {manifest.review.reviewers_per_sample} reviewers per sample ({manifest.review.people} people), "
        f"{manifest.review.adjudicated_samples} sample(s) settled by an adjudicator; {figures}."
    )


def render_card(
    manifest: ReleaseManifest,
    report: RunReport,
    spec: ReleaseSpec,
    samples: list[Sample],
    config_name: str,
    plots: list[tuple[str, str]],
    files: dict,
) -> str:
    prompts = "\n".join(f"- `{p.prompt_id}` v{p.version} (sha256 `{p.sha256[:12]}`)" for p in manifest.prompts)
    prompts = prompts or "- none (no stage called a model)"
    review = ", ".join(manifest.review_modes)
    review_note = " Mode `auto` accepted every item without a person looking at it." if "auto" in review else ""
    review_note += _review_figures(manifest)
    return f"""---
{_metadata(manifest, spec, config_name, files, _languages(samples))}---

# {escape(spec.pretty_name)} ({manifest.version})

{report.config.recipe.description} Built by recipe `{manifest.recipe}` ({report.config.recipe.paper}),
run `{manifest.run_id}`, code `{manifest.code_version}`, seed {manifest.seed}.

{_backend_notice(manifest)}

## Load

```python
from datasets import load_dataset
ds = load_dataset("<this folder>")  # or load_dataset("<this folder>", "{config_name}"), the same name in every version
# splits: {", ".join(f"{name} ({count})" for name, count in manifest.splits.items())}
```

## Columns

Native types (lists of structs, not JSON in strings); only the columns recipe `{manifest.recipe}` fills. All recipes'
columns: `{SCHEMA_DOC}` in the benchcurate project.

{column_table(manifest.recipe)}

## How it was built

{funnel_markdown(report)}

Prompts:

{prompts}

Review: {review}.{review_note}

## Statistics

{statistics_markdown(manifest.statistics) if manifest.statistics else "-"}

{chr(10).join(f"![{title}]({path})" for title, path in plots)}

## Sources and licenses

{_source_table(samples)}

{_terms_text(manifest)}

## Files

`data/<split>-NNNNN-of-MMMMM.parquet` (images embedded; {sum(len(entry.paths) for entry in files.values())} file(s), each
about {spec.max_shard_mb:g} MB at most), `manifest.json` (configuration hash, prompts, models, funnel, seed),
`SHA256SUMS` (checksums of every other file).

## Datasheet

- **Motivation.** {report.config.recipe.description} It follows the curation steps of {report.config.recipe.paper},
  reproduced by recipe `{manifest.recipe}`.
- **Composition.** {manifest.sample_count} samples ({_splits_text(manifest)}), from {len(manifest.sources)} source(s)
  ({", ".join(f"{escape(name)}: {count}" for name, count in manifest.sources.items())}). Each sample has an image, its
  provenance and license, and the fields listed under Files; statistics are above.
- **Collection process.** Images from the sources above; every generated field records its producer (backend,
  model, prompt version) in the `generated_by` column. Backends: {", ".join(map(escape, manifest.backends)) or "none"}.
- **Preprocessing.** The funnel above: each stage's removals with their reasons; deduplication, quality and
  sampling parameters are in `manifest.json` (the run's configuration, hash `{manifest.config_sha256[:12]}`).
- **Review.** {review}. Each sample's outcome and its reviewers' pseudonymous ids (Label Studio user ids, no
  names) are in the `review_status`, `review_mode` and `review_reviewers` columns; agreement is in `manifest.json`
  (`review`).
- **Uses.** Evaluation of vision-language models. Not for training models that are then evaluated on it. Each
  sample stays under its source's license; see Sources and licenses.
- **Distribution.** This folder is self-contained: `curate release verify <folder>` re-checks it anywhere.
- **Maintenance and removal.** To have a sample removed, add `{{"sample_id": ..., "reason": ...}}` to
  `REMOVALS.jsonl` beside the versions (or ask the maintainers); the next release leaves it out and lists it in
  `manifest.json` (`removed_on_request`). {len(manifest.removed_on_request)} sample(s) removed on request in this
  version.

## Known limits

{_limits(manifest)}
"""
