"""Text that is not ours (a manifest's source or license, a model's name, a category a model proposed) placed in
Markdown we write (the release card, LICENSE.md, report tables): shown as written, never read as HTML, a link, an
image or table structure."""

from __future__ import annotations

import html
import re

_SPECIAL = re.compile(r"([\\`*_\[\]|#!~])")


def escape(text: object) -> str:
    """One line of literal text for Markdown: HTML characters as entities, Markdown's punctuation escaped with a
    backslash, line breaks as spaces."""
    flat = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


def table(rows: list[tuple], columns: list[str], right: tuple[str, ...] = ()) -> str:
    """A Markdown table (pandas, through tabulate): `rows` of values in `columns` order, the columns named in
    `right` aligned right, every value printed as given (no number is reformatted)."""
    import pandas as pd

    frame = pd.DataFrame([[str(value).replace("|", "\\|") for value in row] for row in rows], columns=columns)
    align = ["right" if column in right else "left" for column in columns]
    return frame.to_markdown(index=False, tablefmt="pipe", colalign=align, disable_numparse=True)
