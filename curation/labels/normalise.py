"""category_normalise: merge category names that are the same thing spelled differently; keep the mapping.

Open-vocabulary classification (MultiVerse's "Others", ProBench's proposals) yields variants of one name:
"Photographs", "photograph", "Photos", "Graphs & Charts". The rule, applied to every main and sub label:

1. A name's key is its words, case-folded, with "&" read as "and", punctuation and the fillers "and", "of",
   "the", "a", "an" removed, each word made singular by suffix ("-ies" -> "-y", "-sses"/"-ches"/"-shes"/"-xes"
   lose "-es", a final "-s" goes unless the word ends in "ss", "us" or "is"), sorted and de-duplicated. Names
   with equal keys are one category: case, plurals, "&" and word order never split a category.
2. A synonym table (category_synonyms.yaml, extended by the recipe's `synonyms`) sends an alias to a canonical
   name; it is matched by key, so it needs one entry per alias whatever its spelling.
3. The group's canonical name is a seeded name (the prompt's list) whose key matches, else the group's most
   frequent spelling (ties: the shorter, then the alphabetically first). The result does not depend on the
   order of the items, and normalising again changes nothing.

Sub labels are merged by the same rule within their (already merged) main label. The stage drops nothing; it
rewrites the labels, keeps the raw ones in the item's scores, and records the mapping in its stats.json summary
(and so in the release manifest); `curate report` shows it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Literal

from pydantic import Field

from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext, Update
from benchcurate.curation.taxonomy import default_synonyms, seeded_names
from benchcurate.schemas import Categories, Sample

FILLERS = frozenset({"and", "of", "the", "a", "an"})
LABEL_FIELDS = {"image": ("image_main", "image_sub"), "task": ("task_main", "task_sub")}


class NormaliseConfig(StageConfig):
    labels: list[Literal["image", "task"]] = Field(["image"], min_length=1, description="which label pairs to merge")
    synonyms: dict[str, str] = Field(default_factory=dict, description="alias -> canonical, added to the defaults")
    default_synonyms: bool = Field(True, description="use curation/taxonomy/category_synonyms.yaml")


def singular(word: str) -> str:
    if len(word) <= 3:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def label_key(name: str) -> str:
    """The spelling-independent key of a category name (rule 1)."""
    text = re.sub(r"[^\w\s]", " ", name.casefold().replace("&", " and "))
    return " ".join(sorted({singular(word) for word in text.split() if word not in FILLERS}))


def canonical_names(counts: Counter[str], synonyms: dict[str, str], seeded: tuple[str, ...]) -> dict[str, str]:
    """raw name -> canonical name, for every name in `counts` (rules 2 and 3)."""
    alias = {label_key(name): target for name, target in synonyms.items()}
    named: dict[str, str] = {}  # key -> the spelling to give the group: seeded names first, then alias targets
    for name in [*seeded, *sorted(set(alias.values()))]:
        named.setdefault(label_key(name), name)
    groups: dict[str, list[str]] = defaultdict(list)
    for name in counts:
        key = label_key(name)
        groups[label_key(alias[key]) if key in alias else key].append(name)
    mapping = {}
    for key, names in groups.items():
        chosen = named.get(key) or min(names, key=lambda name: (-counts[name], len(name), name))
        mapping.update(dict.fromkeys(names, chosen))
    return mapping


def labels_view(item: Sample, cfg: object = None) -> dict[str, str | None]:
    return item.categories.model_dump()


def relabel(items: list[dict[str, str | None]], cfg: NormaliseConfig, ctx: StageContext) -> list[Update | None]:
    """Per item: its merged labels with the raw ones as its scores, or None when none changed."""
    synonyms = {**(default_synonyms() if cfg.default_synonyms else {}), **cfg.synonyms}
    updated = [dict(row) for row in items]
    raw: list[dict[str, str]] = [{} for _ in items]
    summary: dict[str, dict] = {}
    for kind in cfg.labels:
        main_field, sub_field = LABEL_FIELDS[kind]
        mains = canonical_names(
            Counter(row[main_field] for row in updated if row[main_field]), synonyms, seeded_names(kind)
        )
        subs_by_main: dict[str, Counter[str]] = defaultdict(Counter)
        for row in updated:
            if row[main_field]:
                row_main = mains[row[main_field]]
                if row[sub_field]:
                    subs_by_main[row_main][row[sub_field]] += 1
        subs = {main: canonical_names(counts, {}, ()) for main, counts in subs_by_main.items()}
        for row, kept_raw in zip(updated, raw, strict=True):
            if not row[main_field]:
                continue
            main = mains[row[main_field]]
            sub = subs[main][row[sub_field]] if row[sub_field] else None
            for name, new in ((main_field, main), (sub_field, sub)):
                if row[name] != new:
                    kept_raw[f"{name}_raw"] = row[name]
                    row[name] = new
        summary[kind] = {
            "merged": {name: target for name, target in sorted(mains.items()) if name != target},
            "sub_merged": {
                main: {name: target for name, target in sorted(mapping.items()) if name != target}
                for main, mapping in sorted(subs.items())
                if any(k != v for k, v in mapping.items())
            },
            "categories_before": len(mains),
            "categories_after": len(set(mains.values())),
        }
    ctx.summary.update(summary)
    return [
        {"categories": Categories.model_validate(row), "scores": changes} if changes else None
        for row, changes in zip(updated, raw, strict=True)
    ]


class TaskNormaliseConfig(NormaliseConfig):
    labels: list[Literal["image", "task"]] = Field(["task"], min_length=1, description="which label pairs to merge")


STAGE = SetStage(name="category_normalise", config=NormaliseConfig, view=labels_view, relabel=relabel)
# the same rule for labels assigned later in a recipe (MultiVerse's free-text task labels); a recipe names each
# stage once, so settings given with --set reach exactly one step
TASK_STAGE = SetStage(name="task_label_normalise", config=TaskNormaliseConfig, view=labels_view, relabel=relabel)
