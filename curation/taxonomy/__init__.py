"""Label vocabularies (ProBench fields, seeded category names, synonyms) and the stages that assign and merge them."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import get_args

import yaml

from benchcurate.schemas.replies import ImageCategoryName, ImageFieldName, TaskFieldName

OTHER_NAMES = ("Others", "Other")  # the "propose a new name" choice of the seeded lists
NO_QUESTION = "(no question: this item is an image only)"  # the question variable of an image-only item


@cache
def probench_taxonomy() -> dict[str, dict[str, dict]]:
    """{"task_fields": {field: {gloss, subfields}}, "image_fields": {...}} from probench.yaml."""
    data = yaml.safe_load(
        (resources.files("benchcurate.curation.taxonomy") / "probench.yaml").read_text(encoding="utf-8")
    )
    for kind, names in (("task_fields", TaskFieldName), ("image_fields", ImageFieldName)):
        listed, allowed = set(data[kind]), set(get_args(names)) - set(OTHER_NAMES)
        if listed != allowed:
            raise ValueError(f"probench.yaml {kind} differ from the reply schema: {sorted(listed ^ allowed)}")
    return data


@cache
def default_synonyms() -> dict[str, str]:
    text = (resources.files("benchcurate.curation.taxonomy") / "category_synonyms.yaml").read_text(encoding="utf-8")
    return dict(yaml.safe_load(text) or {})


def seeded_names(kind: str) -> tuple[str, ...]:
    """Names a seeded list offers for a label kind: canonical spellings that merged groups are given."""
    if kind == "image":
        names = [*get_args(ImageCategoryName), *probench_taxonomy()["image_fields"]]
    else:
        names = list(probench_taxonomy()["task_fields"])
    return tuple(name for name in names if name not in OTHER_NAMES)
