"""Draw the 41 synthetic demo images (charts, documents, diagrams, UI mock-ups, receipts, an icon) with Pillow.

Maintainer tool, outside the package: its output is committed as `curation/demo/rendered/` (the images plus
`IMAGES.jsonl`: each file's kind, description, format, size, license and sha256), and the demo corpus copies those
files. Run it only to change or add demo images (`.venv/bin/python maintainer/render_demo_images.py OUT_DIR`, then
copy the result into that folder and commit it); new bytes mean new demo sample ids. The drawing is seeded per
image, but the bytes depend on Pillow's bundled default font and encoders, so another Pillow may write other files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

__all__ = ["KINDS", "RenderedImage", "render_demo_images", "write_index"]


@dataclass(frozen=True)
class RenderedImage:
    path: Path  # where it was written
    kind: str  # one of KINDS
    description: str  # one line saying what it shows


KINDS = (
    "bar_chart",
    "line_chart",
    "pie_chart",
    "scatter_plot",
    "document",
    "table",
    "flowchart",
    "tree_diagram",
    "network_diagram",
    "ui_screenshot",
    "receipt",
    "icon",
)

_COUNTS = {
    "bar_chart": 5,
    "line_chart": 4,
    "pie_chart": 3,
    "scatter_plot": 2,
    "document": 7,
    "table": 3,
    "flowchart": 4,
    "tree_diagram": 3,
    "network_diagram": 2,
    "ui_screenshot": 5,
    "receipt": 2,
    "icon": 1,
}
_JPEG_KINDS = frozenset({"document", "receipt"})

WHITE = (255, 255, 255)
INK = (25, 25, 25)
GREY_TEXT = (110, 110, 110)
GRID = (228, 228, 228)
SATURATED = (
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (140, 80, 200),
    (23, 160, 190),
    (227, 80, 160),
)
PASTELS = ((198, 219, 239), (253, 218, 180), (204, 235, 197), (222, 218, 240), (255, 240, 170), (250, 205, 215))

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
FIRST_NAMES = (
    "Alice",
    "Ben",
    "Chloe",
    "David",
    "Emma",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "James",
    "Kira",
    "Liam",
    "Maya",
    "Noah",
    "Olivia",
    "Priya",
    "Rosa",
    "Sam",
    "Tom",
    "Yuki",
)
LAST_NAMES = (
    "Adams",
    "Baker",
    "Chen",
    "Diaz",
    "Evans",
    "Fischer",
    "Garcia",
    "Hughes",
    "Ito",
    "Khan",
    "Lopez",
    "Moreau",
    "Novak",
    "Okafor",
    "Patel",
    "Rossi",
    "Silva",
    "Turner",
    "Weber",
    "Young",
)
CITIES = ("Lisbon", "Oslo", "Denver", "Madrid", "Toronto", "Cairo", "Seoul")
CITY_MEAN_C = {
    "Lisbon": 17.5,
    "Oslo": 6.5,
    "Denver": 10.5,
    "Madrid": 15.0,
    "Toronto": 9.0,
    "Cairo": 22.5,
    "Seoul": 12.5,
}  # rough annual means, so the temperature lines are plausible


def _seed(kind: str, index: int) -> int:
    # crc32 rather than hash(): str hashes are salted per process and would break reproducibility.
    return zlib.crc32(f"{kind}:{index}".encode())


# --------------------------------------------------------------------------------------------------- text


@cache
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _fit(text: str, size: int, max_width: float, min_size: int = 8) -> ImageFont.FreeTypeFont:
    while size > min_size and _font(size).getlength(text) > max_width:
        size -= 1
    return _font(size)


def _text(
    draw: ImageDraw.ImageDraw,
    xy: tuple[float, float],
    text: str,
    size: int = 14,
    fill=INK,
    anchor: str = "la",
    max_width: float | None = None,
    bold: bool = False,
) -> None:
    font = _fit(text, size, max_width - bold) if max_width else _font(size)
    draw.text(xy, text, font=font, fill=fill, anchor=anchor)
    if bold:  # a second pass 1px to the right; stroke_width smears small glyphs together
        draw.text((xy[0] + 1, xy[1]), text, font=font, fill=fill, anchor=anchor)


def _vertical_text(img: Image.Image, center: tuple[float, float], text: str, size: int, fill=INK) -> None:
    font = _font(size)
    tile = Image.new("RGB", (int(font.getlength(text)) + 6, size + 8), img.getpixel((0, 0)))
    ImageDraw.Draw(tile).text((tile.width / 2, tile.height / 2), text, font=font, fill=fill, anchor="mm")
    tile = tile.rotate(90, expand=True)
    img.paste(tile, (int(center[0] - tile.width / 2), int(center[1] - tile.height / 2)))


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: float) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        trial = f"{line} {word}".strip()
        if line and font.getlength(trial) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    return lines + [line] if line else lines


def _pick(rng: random.Random, pool, k: int) -> list:
    """k items of pool in their original order."""
    return [pool[i] for i in sorted(rng.sample(range(len(pool)), k))]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def _date(rng: random.Random) -> str:
    return f"{rng.choice(MONTH_NAMES)} {rng.randint(1, 28)}, {rng.randint(2019, 2024)}"


# ------------------------------------------------------------------------------------------ vocabulary

_WORDS = {
    "noun": (
        "report",
        "team",
        "budget",
        "schedule",
        "office",
        "customer",
        "project",
        "meeting",
        "policy",
        "committee",
        "system",
        "review",
        "supplier",
        "account",
        "record",
        "request",
        "program",
        "building",
        "plan",
        "survey",
        "result",
        "member",
        "service",
        "order",
        "delivery",
        "manager",
        "district",
        "library",
        "garden",
        "proposal",
        "deadline",
        "contract",
        "workshop",
        "station",
    ),
    "adj": (
        "annual",
        "new",
        "current",
        "local",
        "final",
        "quarterly",
        "public",
        "small",
        "regional",
        "early",
        "revised",
        "simple",
        "weekly",
        "central",
        "shared",
        "detailed",
        "monthly",
        "internal",
    ),
    "verb": (
        "reviewed",
        "approved",
        "updated",
        "prepared",
        "discussed",
        "supported",
        "completed",
        "described",
        "received",
        "improved",
        "confirmed",
        "planned",
        "shared",
        "checked",
        "reduced",
        "extended",
    ),
    "prep": ("for", "with", "after", "before", "during", "from", "about", "within", "across"),
    "adv": ("carefully", "recently", "again", "quickly", "together", "as expected", "on time", "in full"),
    "opener": (
        "In addition,",
        "However,",
        "As a result,",
        "For this reason,",
        "At the same time,",
        "Last month,",
        "In general,",
        "As agreed,",
    ),
}
_TEMPLATES = (
    "the {adj} {noun} was {verb} {prep} the {noun}.",
    "{opener} the {noun} {verb} a {adj} {noun} {adv}.",
    "each {noun} {verb} the {noun}, and the {adj} {noun} {verb} the {noun} {prep} the {noun}.",
    "we {verb} the {noun} {prep} the {adj} {noun} and {verb} the {noun} {adv}.",
    "the {noun} {verb} {num} {nouns} {prep} the {adj} {noun}.",
    "please note that the {adj} {noun} will be {verb} {prep} the {noun}.",
    "{opener} our {noun} {verb} the {adj} {noun} {prep} every {noun}.",
)


def _plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2] not in "aeiou" else noun + "s"


def _sentence(rng: random.Random) -> str:
    def fill(match: re.Match) -> str:
        slot = match.group(1)
        if slot == "num":
            return str(rng.randint(2, 40))
        if slot == "nouns":
            return _plural(rng.choice(_WORDS["noun"]))
        return rng.choice(_WORDS[slot])

    text = re.sub(r"\{(\w+)\}", fill, rng.choice(_TEMPLATES))
    text = re.sub(r"\ba ([aeiou])", r"an \1", text)
    return text[0].upper() + text[1:]


def _paragraph(rng: random.Random, lo: int = 4, hi: int = 7) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(lo, hi)))


# --------------------------------------------------------------------------------------------- charts


@dataclass
class _Plot:
    left: float
    top: float
    right: float
    bottom: float
    x0: float
    x1: float
    y0: float
    y1: float

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * (self.right - self.left)

    def py(self, y: float) -> float:
        return self.bottom - (y - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """'Nice' tick values covering [lo, hi]."""
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag)
    start = math.floor(lo / step) * step
    values = [start]
    while values[-1] < hi:
        values.append(round(values[-1] + step, 10))
    return values


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _chart_canvas(rng: random.Random) -> Image.Image:
    width = rng.randrange(640, 801, 20)
    return Image.new("RGB", (width, int(width * rng.uniform(0.72, 0.76))), WHITE)


def _legend_width(labels: list[str]) -> int:
    return 0 if len(labels) < 2 else min(170, int(max(_font(13).getlength(t) for t in labels)) + 50)


def _legend(draw: ImageDraw.ImageDraw, x: float, y: float, items: list[tuple[str, tuple]], max_width: float):
    for i, (label, colour) in enumerate(items):
        top = y + i * 24
        draw.rectangle((x, top, x + 14, top + 14), fill=colour)
        _text(draw, (x + 22, top + 7), label, 13, anchor="lm", max_width=max_width - 24)


def _axes(
    img: Image.Image,
    title: str,
    xlabel: str,
    ylabel: str,
    xlim: tuple[float, float],
    yticks: list[float],
    xticks: list[tuple[float, str]],
    legend_w: int,
) -> _Plot:
    """Title, black axes with ticks and numeric labels, axis titles, light y grid; returns the data mapping."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    _text(draw, (w / 2, 16), title, 20, anchor="ma", max_width=w - 40, bold=True)
    label_w = max(_font(12).getlength(_fmt(t)) for t in yticks)
    plot = _Plot(
        left=48 + label_w,
        top=62,
        right=w - 28 - legend_w,
        bottom=h - 70,
        x0=xlim[0],
        x1=xlim[1],
        y0=yticks[0],
        y1=yticks[-1],
    )
    for value in yticks:
        y = plot.py(value)
        if value != yticks[0]:
            draw.line((plot.left, y, plot.right, y), fill=GRID)
        draw.line((plot.left - 6, y, plot.left, y), fill=INK, width=2)
        _text(draw, (plot.left - 10, y), _fmt(value), 12, anchor="rm")
    slot = (plot.right - plot.left) / max(len(xticks), 1)
    for value, label in xticks:
        x = plot.px(value)
        draw.line((x, plot.bottom, x, plot.bottom + 6), fill=INK, width=2)
        if label:
            _text(draw, (x, plot.bottom + 10), label, 12, anchor="ma", max_width=max(slot * 2 - 4, 20))
    draw.line((plot.left, plot.top, plot.left, plot.bottom, plot.right, plot.bottom), fill=INK, width=2)
    _text(draw, ((plot.left + plot.right) / 2, h - 22), xlabel, 14, anchor="mm", max_width=w - 40)
    _vertical_text(img, (18, (plot.top + plot.bottom) / 2), ylabel, 14)
    return plot


_BAR_TOPICS = (  # title, x label, y label, categories, series pool, series noun, value range, what
    (
        "Quarterly revenue by region",
        "Quarter",
        "Revenue ($ thousands)",
        ("Q1", "Q2", "Q3", "Q4"),
        ("North", "South", "East", "West", "Central"),
        "regions",
        (80, 400),
        "quarterly revenue",
    ),
    ("Monthly rainfall in {city}", "Month", "Rainfall (mm)", MONTHS, (), "", (8, 160), "monthly rainfall"),
    (
        "Units sold by product",
        "Product",
        "Units sold",
        ("Laptop", "Tablet", "Phone", "Monitor", "Printer"),
        ("2021", "2022", "2023"),
        "years",
        (150, 1200),
        "units sold per product",
    ),
    (
        "How staff commute to work",
        "Mode of transport",
        "Respondents",
        ("Car", "Bus", "Train", "Bicycle", "Walking", "Other"),
        (),
        "",
        (5, 120),
        "survey answers on commuting",
    ),
    (
        "Average exam score by subject",
        "Subject",
        "Score (out of 100)",
        ("Maths", "Physics", "History", "English", "Biology"),
        ("Class A", "Class B", "Class C"),
        "classes",
        (55, 95),
        "average exam scores per subject",
    ),
)


def _bar_chart(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    title, xlabel, ylabel, cats, pool, noun, (lo, hi), what = _BAR_TOPICS[(index - 1) % len(_BAR_TOPICS)]
    title = title.format(city=rng.choice(CITIES))
    series = _pick(rng, pool, rng.randint(2, min(4, len(pool)))) if pool else [what]
    if pool and len(cats) > 4:
        cats = _pick(rng, cats, rng.randint(4, len(cats)))
    values = [[rng.uniform(lo, hi) for _ in cats] for _ in series]
    colours = rng.sample(SATURATED, len(series))
    img = _chart_canvas(rng)
    plot = _axes(
        img,
        title,
        xlabel,
        ylabel,
        (0, len(cats)),
        _ticks(0, hi * 1.05),
        [(i + 0.5, c) for i, c in enumerate(cats)],
        _legend_width(series if pool else []),
    )
    draw = ImageDraw.Draw(img)
    group = 0.72 if pool else 0.6
    for s, row in enumerate(values):
        for c, value in enumerate(row):
            x = c + (1 - group) / 2 + s * group / len(series)
            draw.rectangle(
                (plot.px(x), plot.py(value), plot.px(x + group / len(series)) - 1, plot.bottom - 1), fill=colours[s]
            )
    if pool:
        _legend(draw, plot.right + 18, plot.top, list(zip(series, colours)), img.width - plot.right - 24)
        return img, f"grouped bar chart of {what} for {len(series)} {noun} ({', '.join(series)})"
    return img, f"bar chart of {title[0].lower() + title[1:]}: {len(cats)} bars ({cats[0]} to {cats[-1]})"


_LINE_TOPICS = (  # title, x label, y label, x tick labels, series pool, base range, amplitude, trend, noise, phase
    ("Average monthly temperature", "Month", "Temperature (°C)", MONTHS, CITIES, (2, 18), 9, 0, 0.8, -1.57),
    (
        "Weekly website visitors",
        "Week",
        "Visitors",
        tuple(str(i) for i in range(1, 13)),
        ("Desktop", "Mobile", "Tablet"),
        (900, 4000),
        300,
        120,
        150,
        0.0,
    ),
    ("Share price of {company}", "Month", "Price ($)", MONTHS, (), (40, 120), 6, 1.5, 3, 0.5),
    (
        "Electricity demand over a day",
        "Hour of day",
        "Demand (MW)",
        tuple(f"{h}:00" if h % 3 == 0 else "" for h in range(24)),
        ("Weekday", "Weekend"),
        (300, 500),
        90,
        0,
        12,
        -2.0,
    ),
)


def _line_chart(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    title, xlabel, ylabel, xlabels, pool, base, amp, trend, noise, phase = _LINE_TOPICS[(index - 1) % 4]
    company = rng.choice(("Northwind", "Acme Foods", "Bluebird Air", "Helio Energy"))
    title = title.format(company=company)
    series = _pick(rng, pool, rng.randint(2, min(3, len(pool)))) if pool else [company]
    n = len(xlabels)
    period = 12 if n >= 12 else n
    data = []
    for name in series:
        level, walk = CITY_MEAN_C.get(name, rng.uniform(*base)), 0.0
        scale, shift = rng.uniform(0.6, 1.2), rng.uniform(-0.5, 0.5)
        row = []
        for i in range(n):
            walk += rng.gauss(0, noise) if not pool else 0.0  # share prices wander; the others are seasonal
            row.append(
                level
                + scale * amp * math.sin(2 * math.pi * i / period + phase + shift)
                + trend * i
                + walk
                + rng.gauss(0, noise)
            )
        data.append(row)
    flat = [v for row in data for v in row]
    spread = max(flat) - min(flat)
    colours = rng.sample(SATURATED, len(series))
    img = _chart_canvas(rng)
    plot = _axes(
        img,
        title,
        xlabel,
        ylabel,
        (-0.5, n - 0.5),
        _ticks(min(flat) - 0.05 * spread, max(flat) + 0.05 * spread),
        list(enumerate(xlabels)),
        _legend_width(series if pool else []),
    )
    draw = ImageDraw.Draw(img)
    for row, colour in zip(data, colours):
        points = [(plot.px(i), plot.py(v)) for i, v in enumerate(row)]
        draw.line(points, fill=colour, width=3, joint="curve")
        if n <= 12:
            for x, y in points:
                draw.ellipse((x - 4, y - 4, x + 4, y + 4), fill=colour)
    if pool:
        _legend(draw, plot.right + 18, plot.top, list(zip(series, colours)), img.width - plot.right - 24)
    if not pool:
        return img, f"line chart of the monthly share price of {company} over {n} months"
    return img, f"line chart of {title.lower()} for {len(series)} series ({', '.join(series)}) over {n} points"


_PIE_TOPICS = (
    ("Favourite fruit (survey of {n} people)", ("Apples", "Bananas", "Oranges", "Grapes", "Mangoes")),
    ("Household budget", ("Housing", "Food", "Transport", "Savings", "Leisure")),
    ("How students spend a weekday", ("Sleep", "Classes", "Homework", "Sport", "Free time")),
)


def _pie_chart(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    """Three layouts, so the pies do not look alike at a glance: a pie with the legend on the right, a donut with
    the legend on the left, and a smaller pie with the legend in rows underneath."""
    title, pool = _PIE_TOPICS[(index - 1) % len(_PIE_TOPICS)]
    layout = ("pie_right_legend", "donut_left_legend", "pie_legend_below")[(index - 1) % 3]
    title = title.format(n=rng.randrange(100, 1000, 10))
    labels = _pick(rng, pool, {"pie_right_legend": 3, "donut_left_legend": 5}.get(layout, 4))
    weights = [rng.uniform(1, 5) for _ in labels]
    shares = [round(100 * w / sum(weights)) for w in weights]
    shares[0] += 100 - sum(shares)
    colours = rng.sample(SATURATED, len(labels))
    img = _chart_canvas(rng)
    draw = ImageDraw.Draw(img)
    w, h = img.size
    items = [(f"{label} ({share}%)", colour) for label, share, colour in zip(labels, shares, colours)]
    if layout == "pie_right_legend":
        _text(draw, (w / 2, 16), title, 20, anchor="ma", max_width=w - 40, bold=True)
        r, cx, cy, start, hole = h * 0.36, w * 0.33, h * 0.56, -90.0, 0.0
        _legend(draw, cx + r + 48, cy - 12 * len(items), items, w - (cx + r + 48) - 10)
    elif layout == "donut_left_legend":
        _text(draw, (28, 16), title, 20, anchor="la", max_width=w - 56, bold=True)
        r, cx, cy, hole = h * 0.37, w * 0.64, h * 0.55, 0.52
        start = rng.choice((-150.0, -120.0, 0.0))
        _legend(draw, 40, cy - 12 * len(items), items, cx - r - 60)
    else:
        _text(draw, (w / 2, 16), title, 20, anchor="ma", max_width=w - 40, bold=True)
        r, cx, cy, hole = h * 0.29, w * 0.5, h * 0.42, 0.0
        start = rng.uniform(-180, 0)
        cell = (w - 80) / 2
        for k, (label, colour) in enumerate(items):  # two columns of legend entries under the pie
            x, y = 40 + (k % 2) * cell + cell * 0.18, cy + r + 34 + (k // 2) * 26
            draw.rectangle((x, y, x + 14, y + 14), fill=colour)
            _text(draw, (x + 22, y + 7), label, 14, anchor="lm", max_width=cell * 0.8)
    for share, colour in zip(shares, colours):
        end = start + 3.6 * share
        draw.pieslice((cx - r, cy - r, cx + r, cy + r), start, end, fill=colour, outline=WHITE, width=2)
        mid = math.radians((start + end) / 2)
        at = 0.76 if hole else 0.62
        if share >= 6:
            _text(
                draw,
                (cx + at * r * math.cos(mid), cy + at * r * math.sin(mid)),
                f"{share}%",
                15,
                fill=WHITE,
                anchor="mm",
                bold=True,
            )
        start = end
    if hole:
        draw.ellipse((cx - hole * r, cy - hole * r, cx + hole * r, cy + hole * r), fill=WHITE)
        _text(draw, (cx, cy - 12), str(len(labels)), 26, anchor="mm", bold=True)
        _text(draw, (cx, cy + 16), "categories", 13, fill=GREY_TEXT, anchor="mm")
    shape = "donut chart" if hole else "pie chart"
    where = {
        "pie_right_legend": "legend on the right",
        "donut_left_legend": "legend on the left",
        "pie_legend_below": "legend below",
    }[layout]
    return img, (
        f"{shape} of {title.split(' (')[0].lower()} split into {len(labels)} slices ({', '.join(labels)}), {where}"
    )


def _scatter_plot(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    if index % 2:
        title, xlabel, ylabel = "Study hours vs exam score", "Hours studied per week", "Exam score"
        groups = ["Students"]
        x_range, slope, intercept, cap = (1, 20), 2.6, 38, 100
    else:
        title, xlabel, ylabel, groups = "Height vs weight", "Height (cm)", "Weight (kg)", ["Adults", "Teenagers"]
        x_range, slope, intercept, cap = (150, 195), 0.9, -90, 200

    def point() -> tuple[float, float]:
        x = rng.uniform(*x_range)
        return x, min(cap, intercept + slope * x + rng.gauss(0, 7))

    data = [[point() for _ in range(rng.randint(35, 70))] for _ in groups]
    if len(groups) == 2:  # teenagers are shorter and lighter
        data[1] = [(x - 12, y - 14) for x, y in data[1]]
    xs = [p[0] for row in data for p in row]
    ys = [p[1] for row in data for p in row]
    xt, yt = _ticks(min(xs), max(xs)), _ticks(min(ys), max(ys))
    colours = rng.sample(SATURATED, len(groups))
    img = _chart_canvas(rng)
    plot = _axes(img, title, xlabel, ylabel, (xt[0], xt[-1]), yt, [(v, _fmt(v)) for v in xt], _legend_width(groups))
    draw = ImageDraw.Draw(img)
    for row, colour in zip(data, colours):
        for x, y in row:
            draw.ellipse((plot.px(x) - 4, plot.py(y) - 4, plot.px(x) + 4, plot.py(y) + 4), fill=colour)
    if len(groups) == 1:  # least-squares trend line
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        x0, x1 = min(xs), max(xs)
        draw.line(
            (plot.px(x0), plot.py(my + slope * (x0 - mx)), plot.px(x1), plot.py(my + slope * (x1 - mx))),
            fill=INK,
            width=2,
        )
    else:
        _legend(draw, plot.right + 18, plot.top, list(zip(groups, colours)), img.width - plot.right - 24)
    shape = "with a trend line" if len(groups) == 1 else f"in {len(groups)} groups ({', '.join(groups)})"
    return img, f"scatter plot of {title.lower()}: {len(xs)} points {shape}"


# ------------------------------------------------------------------------------------------ documents

_DOCUMENTS = (  # title, blocks; a block is (type, argument)
    (
        "Memorandum",
        [
            ("meta", "To: All staff"),
            ("meta", "From: {name}, Operations"),
            ("meta", "Subject: Changes to the {adj} {noun}"),
            ("para", 0),
            ("para", 0),
            ("para", 0),
            ("para", 0),
        ],
    ),
    (
        "Minutes of the {Adj} Committee Meeting",
        [
            ("meta", "Present: {name}, {name}, {name}"),
            ("heading", "Discussion"),
            ("para", 0),
            ("para", 0),
            ("heading", "Action items"),
            ("list", 4),
            ("para", 0),
        ],
    ),
    (
        "Quarterly Project Report",
        [
            ("heading", "1. Summary"),
            ("para", 0),
            ("heading", "2. Progress"),
            ("para", 0),
            ("list", 3),
            ("heading", "3. Next steps"),
            ("para", 0),
        ],
    ),
    ("Notice to Residents", [("para", 0), ("para", 0), ("list", 3), ("para", 0), ("para", 0)]),
    (
        "Application for a Community Garden Plot",
        [
            ("para", 0),
            ("fields", "Full name|Address|Phone|Email|Preferred start date"),
            ("para", 0),
            ("fields", "Signature|Date"),
        ],
    ),
    (
        "Letter of Reference",
        [("meta", "Dear {name},"), ("para", 0), ("para", 0), ("para", 0), ("meta", "Sincerely,"), ("meta", "{name}")],
    ),
    ("Laboratory Safety Guidelines", [("para", 0), ("list", 6), ("para", 0), ("para", 0)]),
)


def _document(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    title, blocks = _DOCUMENTS[(index - 1) % len(_DOCUMENTS)]
    title = title.format(Adj=rng.choice(_WORDS["adj"]).capitalize())
    w, h = rng.randint(800, 850), rng.randint(1000, 1100)
    img = Image.new("RGB", (w, h), (253, 253, 251))
    draw = ImageDraw.Draw(img)
    margin, body, lh = rng.randint(70, 90), _font(16), 24
    ink = (rng.randint(40, 60),) * 3
    right, bottom = w - margin, h - 90
    y, counts = 166, {"para": 0, "list": 0, "fields": 0}
    if title == "Notice to Residents":  # a framed notice with a centred heading
        draw.rectangle((margin - 34, 36, right + 34, h - 28), outline=(70, 70, 70), width=4)
        draw.rectangle((margin - 26, 44, right + 26, h - 36), outline=(150, 150, 150), width=1)
        _text(draw, (w / 2, 70), title.upper(), 30, fill=INK, anchor="ma", max_width=right - margin, bold=True)
        _text(draw, (w / 2, 116), f"Posted {_date(rng)}", 15, fill=GREY_TEXT, anchor="ma")
        draw.line((w / 2 - 120, 146, w / 2 + 120, 146), fill=(120, 120, 120), width=2)
    else:
        _text(draw, (margin, 70), title, 28, fill=INK, max_width=right - margin, bold=True)
        _text(draw, (margin, 116), f"Date: {_date(rng)}", 15, fill=GREY_TEXT)
        draw.line((margin, 146, right, 146), fill=(180, 180, 180), width=1)
    if title == "Laboratory Safety Guidelines":  # a shaded warning callout under the heading
        warning = _wrap(
            "Warning: eye protection, gloves and a buttoned lab coat must be worn at all times. "
            "Report every spill or injury to the supervisor at once.",
            _font(16),
            right - margin - 90,
        )
        box_h = 36 + lh * len(warning)
        draw.rectangle((margin, y, right, y + box_h), fill=(255, 240, 200), outline=(225, 170, 60), width=2)
        draw.rectangle((margin, y, margin + 8, y + box_h), fill=(225, 150, 30))
        cx, cy = margin + 44, y + box_h / 2
        draw.polygon([(cx, cy - 20), (cx + 22, cy + 18), (cx - 22, cy + 18)], fill=(225, 150, 30))
        _text(draw, (cx, cy + 5), "!", 22, fill=WHITE, anchor="mm", bold=True)
        for k, line in enumerate(warning):
            draw.text((margin + 78, y + 18 + k * lh), line, font=_font(16), fill=INK)
        y += box_h + 22

    def lines(texts: list[str], x: float, first_prefix: str = "") -> None:
        nonlocal y
        for i, line in enumerate(texts):
            if y + lh > bottom:
                return
            if i == 0 and first_prefix:
                draw.text((x - 26, y), first_prefix, font=body, fill=ink)
            draw.text((x, y), line, font=body, fill=ink)
            y += lh

    for block, arg in blocks:
        if y + lh > bottom:
            break
        counts[block] = counts.get(block, 0) + 1
        if block == "meta":
            text = re.sub(
                r"\{(\w+)\}", lambda m: _name(rng) if m.group(1) == "name" else rng.choice(_WORDS[m.group(1)]), arg
            )
            lines([text], margin)
        elif block == "heading":
            y += 6
            _text(draw, (margin, y), arg, 19, fill=INK, bold=True)
            y += 32
        elif block == "para":
            lines(_wrap(_paragraph(rng), body, right - margin), margin)
        elif block == "list":
            for number in range(1, arg + 1):
                lines(_wrap(_sentence(rng), body, right - margin - 30), margin + 30, f"{number}.")
                y += 4
        elif block == "fields":
            for label in arg.split("|"):
                if y + 40 > bottom:
                    break
                y += 10
                draw.text((margin, y), f"{label}:", font=body, fill=ink)
                start = margin + body.getlength(f"{label}:") + 12
                draw.line((start, y + 20, right, y + 20), fill=(90, 90, 90), width=1)
                y += 30
        y += 14
    _text(draw, (w / 2, h - 50), f"Page 1 of {rng.randint(1, 4)}", 13, fill=GREY_TEXT, anchor="mm")
    description = f"document page '{title}' with a date line and {counts['para']} paragraphs"
    if counts["list"]:
        description += ", a numbered list"
    if counts["fields"]:
        description += ", form fields with underlines"
    return img, description


def _table(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    n_rows = rng.randint(6, 12)
    if index == 1:
        title = "Staff directory"
        header = ["Name", "Department", "Office", "Extension", "Years"]
        rows = [
            [
                _name(rng),
                rng.choice(("Finance", "Sales", "Legal", "Engineering", "Support")),
                f"{rng.choice('ABC')}-{rng.randint(101, 420)}",
                str(rng.randint(2000, 4999)),
                str(rng.randint(1, 25)),
            ]
            for _ in range(n_rows)
        ]
    elif index == 2:
        title = f"Sales by region, {rng.randint(2019, 2024)} ($)"
        header = ["Region", "Q1", "Q2", "Q3", "Q4", "Total"]
        regions = (
            "North",
            "South",
            "East",
            "West",
            "Central",
            "Coastal",
            "Mountain",
            "Metro",
            "Lakes",
            "Islands",
            "Valley",
            "Plains",
        )
        rows = []
        for region in regions[:n_rows]:
            quarters = [rng.randint(12_000, 95_000) for _ in range(4)]
            rows.append([region] + [f"{q:,}" for q in quarters] + [f"{sum(quarters):,}"])
    else:
        title = "Warehouse inventory"
        header = ["Item", "SKU", "In stock", "Unit price", "Value"]
        items = (
            "Desk lamp",
            "Office chair",
            "Notebook",
            "Stapler",
            "Monitor arm",
            "Keyboard",
            "Mouse pad",
            "Whiteboard",
            "Paper tray",
            "USB cable",
            "Headset",
            "Filing box",
        )
        rows = []
        for item in rng.sample(items, n_rows):
            stock, price = rng.randint(0, 400), rng.randint(150, 25_000) / 100
            rows.append([item, f"SK-{rng.randint(1000, 9999)}", str(stock), f"{price:.2f}", f"{stock * price:,.2f}"])
    spreadsheet = rng.random() < 0.67  # row numbers and column letters, like a spreadsheet grid
    w = rng.randint(880, 1000)
    row_h = rng.randint(32, 38)
    top, gutter = 60, (40 if spreadsheet else 0)
    band = 24 if spreadsheet else 0
    h = top + band + (n_rows + 1) * row_h + 40
    img = Image.new("RGB", (w, h), WHITE)
    draw = ImageDraw.Draw(img)
    _text(draw, (30, 20), title, 20, bold=True, max_width=w - 60)
    left, right = 30 + gutter, w - 30
    weights = [max(_font(14).getlength(str(r[c])) for r in rows + [header]) + 30 for c in range(len(header))]
    xs = [left]
    for weight in weights:
        xs.append(xs[-1] + weight * (right - left) / sum(weights))
    tint = rng.choice(((210, 225, 245), (215, 235, 215), (235, 225, 245), (250, 230, 205)))
    y0 = top + band
    if spreadsheet:
        draw.rectangle((30, top, right, y0 + (n_rows + 1) * row_h), fill=(242, 242, 242))
        for c in range(len(header)):
            _text(draw, ((xs[c] + xs[c + 1]) / 2, top + band / 2), "ABCDEF"[c], 12, GREY_TEXT, "mm")
    draw.rectangle((left, y0, right, y0 + row_h), fill=tint)
    for r, row in enumerate([header] + rows):
        y = y0 + r * row_h
        if r and r % 2 == 0 and not spreadsheet:
            draw.rectangle((left, y, right, y + row_h), fill=(247, 247, 247))
        elif r:
            draw.rectangle((left, y, right, y + row_h), fill=WHITE)
        if spreadsheet:
            _text(draw, (30 + gutter / 2, y + row_h / 2), str(r + 1), 12, GREY_TEXT, "mm")
        for c, cell in enumerate(row):
            numeric = r > 0 and bool(re.fullmatch(r"[\d,.]+", cell))
            x, anchor = (xs[c + 1] - 10, "rm") if numeric else (xs[c] + 10, "lm")
            _text(draw, (x, y + row_h / 2), cell, 14, INK, anchor, max_width=xs[c + 1] - xs[c] - 16, bold=r == 0)
    grid_left = 30 if spreadsheet else left
    for r in range(n_rows + 2):
        draw.line((grid_left, y0 + r * row_h, right, y0 + r * row_h), fill=(190, 190, 190))
    for x in ([30] if spreadsheet else []) + xs:
        draw.line((x, top if spreadsheet else y0, x, y0 + (n_rows + 1) * row_h), fill=(190, 190, 190))
    return img, f"table '{title}' with {n_rows} rows and {len(header)} columns ({', '.join(header)})"


# ------------------------------------------------------------------------------------------- diagrams


def _arrow(draw: ImageDraw.ImageDraw, points: list[tuple[float, float]], fill=(60, 60, 60), head: float = 11):
    draw.line(points, fill=fill, width=2)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    angle = math.atan2(y1 - y0, x1 - x0)
    draw.polygon(
        [(x1, y1)] + [(x1 - head * math.cos(angle + d), y1 - head * math.sin(angle + d)) for d in (-0.4, 0.4)],
        fill=fill,
    )


def _node(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, w: float, h: float, label: str, fill):
    box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
    if shape == "decision":
        draw.polygon([(cx, box[1]), (box[2], cy), (cx, box[3]), (box[0], cy)], fill=fill, outline=(70, 70, 70), width=2)
    else:
        draw.rounded_rectangle(
            box, radius=h / 2 if shape == "terminal" else 10, fill=fill, outline=(70, 70, 70), width=2
        )
    _text(draw, (cx, cy), label, 15, INK, "mm", max_width=w * (0.62 if shape == "decision" else 1) - 16)


_FLOWS = (  # what, steps before the decision, decision, steps after "yes", step on "no" (loops back)
    (
        "order handling",
        ["Receive order", "Check stock"],
        "In stock?",
        ["Pack items", "Ship order"],
        "Reorder from supplier",
    ),
    ("user login", ["Open login page", "Enter password"], "Valid?", ["Load dashboard"], "Show error message"),
    (
        "support ticket handling",
        ["Ticket received", "Assign agent"],
        "Resolved?",
        ["Close ticket", "Send survey"],
        "Escalate to lead",
    ),
    (
        "expense approval",
        ["Submit expense"],
        "Receipt attached?",
        ["Manager approves", "Pay employee"],
        "Request receipt",
    ),
)
_FLOW_LINE = (60, 60, 60)


def _flowchart(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    """Four layouts: top to bottom with the loop on the right, left to right with the loop underneath, top to
    bottom with a title and the loop on the left, and left to right across swimlanes."""
    what, before, decision, after, no_step = _FLOWS[(index - 1) % len(_FLOWS)]
    nodes = (
        [("terminal", "Start")]
        + [("process", s) for s in before]
        + [("decision", decision)]
        + [("process", s) for s in after]
        + [("terminal", "End")]
    )
    layout = ("down_right", "across", "down_left", "swimlanes")[(index - 1) % 4]
    fills = rng.sample(PASTELS, rng.randint(1, 3))
    fill_of = {"terminal": fills[0], "process": fills[1 % len(fills)], "decision": fills[2 % len(fills)]}
    d = len(before) + 1  # index of the decision node
    if layout in ("down_right", "down_left"):
        img, how = _flow_down(
            rng,
            nodes,
            d,
            no_step,
            fill_of,
            side=1 if layout == "down_right" else -1,
            title=what if layout == "down_left" else None,
        )
    elif layout == "across":
        img, how = _flow_across(rng, nodes, d, no_step, fill_of, what)
    else:
        img, how = _flow_lanes(rng, nodes, d, no_step, fill_of, what)
    return img, (
        f"flowchart of {what}: {len(nodes)} steps {how} with a '{decision}' decision "
        f"that loops back through '{no_step}'"
    )


def _flow_down(
    rng: random.Random, nodes: list, d: int, no_step: str, fill_of: dict, side: int, title: str | None
) -> tuple[Image.Image, str]:
    spacing = rng.randint(100, 115)
    head = 60 if title else 0
    w, h = rng.randint(700, 800), 40 + head + len(nodes) * spacing
    img = Image.new("RGB", (w, h), rng.choice((WHITE, (250, 250, 252))))
    draw = ImageDraw.Draw(img)
    if title:
        _text(draw, (w / 2, 24), title.capitalize(), 20, INK, "ma", bold=True)
    size_of = {"terminal": (150, 46), "process": (220, 52), "decision": (200, 84)}
    cx = w * (0.4 if side > 0 else 0.62)
    centres = [head + 20 + spacing * (i + 0.5) for i in range(len(nodes))]
    for i in range(len(nodes) - 1):
        (s0, _), (s1, _) = nodes[i], nodes[i + 1]
        _arrow(draw, [(cx, centres[i] + size_of[s0][1] / 2), (cx, centres[i + 1] - size_of[s1][1] / 2 - 1)])
    dy, (dw, _) = centres[d], size_of["decision"]
    _text(draw, (cx + 10, dy + 48), "Yes", 14, INK, "la", bold=True)
    sw = min(190, w * 0.4)
    sx = w * 0.78 if side > 0 else w * 0.2
    _arrow(draw, [(cx + side * dw / 2, dy), (sx - side * (sw / 2 + 1), dy)])
    _text(draw, ((cx + side * dw / 2 + sx - side * sw / 2) / 2, dy - 8), "No", 14, INK, "ms", bold=True)
    ty = centres[d - 1]  # the "no" branch loops back to the step before the decision
    _arrow(draw, [(sx, dy - 26), (sx, ty), (cx + side * (size_of[nodes[d - 1][0]][0] / 2 + 1), ty)])
    _node(draw, "process", sx, dy, sw, 52, no_step, fill_of["process"])
    for (shape, label), cy in zip(nodes, centres):
        _node(draw, shape, cx, cy, *size_of[shape], label, fill_of[shape])
    return img, "top to bottom" + (", titled," if title else "")


def _flow_across(
    rng: random.Random, nodes: list, d: int, no_step: str, fill_of: dict, what: str
) -> tuple[Image.Image, str]:
    size_of = {"terminal": (100, 44), "process": (150, 52), "decision": (130, 80)}
    gap = rng.randint(44, 56)
    w = 40 + sum(size_of[s][0] for s, _ in nodes) + gap * (len(nodes) - 1)
    h = rng.randint(320, 350)
    img = Image.new("RGB", (w, h), WHITE)
    draw = ImageDraw.Draw(img)
    _text(draw, (20, 18), what.capitalize(), 18, INK, bold=True)
    cy = h * 0.36
    xs, x = [], 20.0
    for shape, _ in nodes:
        xs.append(x + size_of[shape][0] / 2)
        x += size_of[shape][0] + gap
    for i in range(len(nodes) - 1):
        _arrow(draw, [(xs[i] + size_of[nodes[i][0]][0] / 2, cy), (xs[i + 1] - size_of[nodes[i + 1][0]][0] / 2 - 1, cy)])
    dx, dh = xs[d], size_of["decision"][1]
    _text(draw, (dx + size_of["decision"][0] / 2 + 8, cy - 8), "Yes", 14, INK, "ls", bold=True)
    ny = h - 62
    _arrow(draw, [(dx, cy + dh / 2), (dx, ny - 27)])
    _text(draw, (dx + 8, (cy + dh / 2 + ny - 26) / 2), "No", 14, INK, "lm", bold=True)
    px = xs[d - 1]  # loop back to the step before the decision
    _arrow(draw, [(dx - 85, ny), (px, ny), (px, cy + size_of[nodes[d - 1][0]][1] / 2 + 1)])
    _node(draw, "process", dx, ny, 170, 52, no_step, fill_of["process"])
    for (shape, label), x in zip(nodes, xs):
        _node(draw, shape, x, cy, *size_of[shape], label, fill_of[shape])
    return img, "left to right"


def _flow_lanes(
    rng: random.Random, nodes: list, d: int, no_step: str, fill_of: dict, what: str
) -> tuple[Image.Image, str]:
    lanes = ("Employee", "Manager", "Finance")
    lane_of = [0] * d + [1] * 2 + [2] * (len(nodes) - d - 2)  # the decision and the next step are the manager's
    size_of = {"terminal": (100, 44), "process": (140, 52), "decision": (190, 88)}
    head, col, lane_h, top = 110, rng.randint(196, 204), rng.randint(124, 132), 56
    w = head + 20 + col * len(nodes)
    h = top + lane_h * len(lanes) + 20
    img = Image.new("RGB", (w, h), WHITE)
    draw = ImageDraw.Draw(img)
    _text(draw, (20, 18), f"{what.capitalize()} (swimlanes)", 18, INK, bold=True)
    lane_fill = fill_of["terminal"]
    for k, lane in enumerate(lanes):
        y = top + k * lane_h
        draw.rectangle(
            (10, y, w - 10, y + lane_h), fill=WHITE if k % 2 == 0 else (248, 248, 250), outline=(150, 150, 150)
        )
        draw.rectangle((10, y, head, y + lane_h), fill=lane_fill, outline=(150, 150, 150))
        _text(draw, ((10 + head) / 2, y + lane_h / 2), lane, 15, INK, "mm", bold=True)
    xs = [head + 10 + col * (i + 0.5) for i in range(len(nodes))]
    ys = [top + lane_h * (lane + 0.5) for lane in lane_of]
    for i in range(len(nodes) - 1):
        (s0, _), (s1, _) = nodes[i], nodes[i + 1]
        x0, x1 = xs[i] + size_of[s0][0] / 2, xs[i + 1] - size_of[s1][0] / 2 - 1
        if ys[i] == ys[i + 1]:
            _arrow(draw, [(x0, ys[i]), (x1, ys[i])])
        else:
            mid = (x0 + x1) / 2
            _arrow(draw, [(x0, ys[i]), (mid, ys[i]), (mid, ys[i + 1]), (x1, ys[i + 1])])
    dx, dy, dh = xs[d], ys[d], size_of["decision"][1]
    _text(draw, (dx + size_of["decision"][0] / 2 + 4, dy - 6), "Yes", 14, INK, "ls", bold=True)
    ny = ys[d - 1]  # "no" goes up into the employee's lane and back to the previous step
    _arrow(draw, [(dx, dy - dh / 2), (dx, ny + 27)])
    _text(draw, (dx + 8, (dy - dh / 2 + ny + 26) / 2), "No", 14, INK, "lm", bold=True)
    loop_y = top + 12
    px = xs[d - 1]
    _arrow(draw, [(dx, ny - 26), (dx, loop_y), (px, loop_y), (px, ny - 27)])
    _node(draw, "process", dx, ny, 140, 52, no_step, fill_of["process"])
    for (shape, label), x, y in zip(nodes, xs, ys):
        _node(draw, shape, x, y, *size_of[shape], label, fill_of[shape])
    return img, f"left to right across {len(lanes)} swimlanes ({', '.join(lanes)})"


_TREES = (  # what, root, {branch: leaves}
    (
        "organisation chart",
        "Chief Executive",
        {
            "Operations": ["Logistics", "Facilities", "Purchasing"],
            "Finance": ["Accounting", "Payroll", "Audit"],
            "Engineering": ["Platform", "Mobile", "Quality"],
            "Sales": ["Accounts", "Partners", "Marketing"],
        },
    ),
    (
        "animal taxonomy",
        "Animals",
        {
            "Mammals": ["Dog", "Whale", "Bat"],
            "Birds": ["Eagle", "Penguin", "Owl"],
            "Fish": ["Salmon", "Shark"],
            "Reptiles": ["Lizard", "Turtle", "Snake"],
        },
    ),
    (
        "website site map",
        "Home",
        {
            "Products": ["Laptops", "Phones", "Accessories"],
            "Support": ["FAQ", "Contact", "Returns"],
            "About": ["Team", "Careers"],
            "Blog": ["News", "Guides", "Events"],
        },
    ),
)


def _tree_diagram(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    what, root, branches = _TREES[(index - 1) % len(_TREES)]
    names = _pick(rng, list(branches), rng.randint(3, 4))
    tree = {b: _pick(rng, branches[b], rng.randint(2, min(3, len(branches[b])))) for b in names}
    n_leaves = sum(len(v) for v in tree.values())
    w, h = rng.randint(960, 1040), rng.randint(520, 580)
    img = Image.new("RGB", (w, h), WHITE)
    draw = ImageDraw.Draw(img)
    fills = rng.sample(PASTELS, rng.randint(1, 3))
    _text(draw, (24, 18), what.capitalize(), 18, INK, bold=True)
    slot = (w - 40) / n_leaves
    levels = (110, 110 + (h - 150) / 2, h - 60)
    leaf_w, box_h = min(130, slot - 12), 44
    leaf_x, branch_x = {}, {}
    i = 0
    for branch, leaves in tree.items():
        xs = [20 + slot * (i + k + 0.5) for k in range(len(leaves))]
        i += len(leaves)
        branch_x[branch] = sum(xs) / len(xs)
        leaf_x.update({(branch, leaf): x for leaf, x in zip(leaves, xs)})
    root_x = sum(branch_x.values()) / len(branch_x)

    def connect(px: float, py: float, child_xs: list[float], cy: float) -> None:
        mid = (py + box_h / 2 + cy - box_h / 2) / 2
        draw.line((px, py + box_h / 2, px, mid), fill=(90, 90, 90), width=2)
        draw.line((min(child_xs + [px]), mid, max(child_xs + [px]), mid), fill=(90, 90, 90), width=2)
        for x in child_xs:
            draw.line((x, mid, x, cy - box_h / 2), fill=(90, 90, 90), width=2)

    connect(root_x, levels[0], list(branch_x.values()), levels[1])
    for branch, leaves in tree.items():
        connect(branch_x[branch], levels[1], [leaf_x[(branch, leaf)] for leaf in leaves], levels[2])
    _node(draw, "process", root_x, levels[0], 180, box_h, root, fills[0])
    for branch, leaves in tree.items():
        _node(
            draw,
            "process",
            branch_x[branch],
            levels[1],
            min(150, slot * len(leaves) - 12),
            box_h,
            branch,
            fills[1 % len(fills)],
        )
        for leaf in leaves:
            _node(draw, "process", leaf_x[(branch, leaf)], levels[2], leaf_w, box_h, leaf, fills[2 % len(fills)])
    return img, (f"tree diagram ({what}) rooted at '{root}' with {len(tree)} branches and {n_leaves} leaves")


def _network_diagram(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    w, h, r = rng.randint(780, 860), rng.randint(560, 620), 32
    if index % 2:
        what = "office computer network"
        chain = ["Internet", "Firewall", "Router", "Switch"]
        devices = ["Server", "NAS", "Printer", "PC 1", "PC 2", "PC 3"]
        labels = chain + devices + ["Laptop"]
        edges = [(0, 1), (1, 2), (2, 3), (4, 5), (2, 10)] + [(3, 4 + k) for k in range(len(devices))]
        cx, step = w / 2 + rng.uniform(-60, 60), (h - 160) / 4
        positions = [(cx, 95 + k * step) for k in range(len(chain))]
        slot = (w - 60) / len(devices)
        positions += [(30 + slot * (k + 0.5), h - r - 22) for k in range(len(devices))]
        positions.append((cx + rng.choice((-1, 1)) * rng.uniform(170, 230), positions[2][1]))
    else:
        what = "social network of friends"
        labels = rng.sample(FIRST_NAMES, rng.randint(8, 11))
        edges = [(i, rng.randrange(i)) for i in range(1, len(labels))]  # spanning tree keeps it connected
        edges += [tuple(rng.sample(range(len(labels)), 2)) for _ in range(len(labels) // 2)]
        edges = sorted({tuple(sorted(e)) for e in edges})
        rx, ry = w / 2 - r - 40, (h - 70) / 2 - r - 20
        positions = []
        for k in range(len(labels)):  # a jittered ring keeps nodes apart and edges readable
            angle = 2 * math.pi * k / len(labels) + rng.uniform(-0.1, 0.1)
            positions.append((w / 2 + rx * math.cos(angle), 70 + (h - 70) / 2 + ry * math.sin(angle)))
    img = Image.new("RGB", (w, h), WHITE)
    draw = ImageDraw.Draw(img)
    _text(draw, (24, 18), what.capitalize(), 18, INK, bold=True)
    for a, b in edges:
        draw.line((positions[a], positions[b]), fill=(120, 120, 120), width=2)
    fills = rng.sample(PASTELS, rng.randint(1, 3))
    for k, ((x, y), label) in enumerate(zip(positions, labels)):
        draw.ellipse((x - r, y - r, x + r, y + r), fill=fills[k % len(fills)], outline=(60, 60, 60), width=2)
        _text(draw, (x, y), label, 13, INK, "mm", max_width=2 * r - 8)
    return img, f"network diagram ({what}): {len(labels)} labelled nodes joined by {len(edges)} links"


# ---------------------------------------------------------------------------------------------- UI
# Five apps with five different layouts (table view, three-pane mail client, kanban board, dark analytics
# dashboard, portal with a hero banner and a form), so no two screenshots share their coarse structure.

_STATUS = (("Done", (44, 160, 44)), ("Pending", (230, 140, 20)), ("Failed", (214, 39, 40)))
_MUTED = (60, 60, 70)
_LINE = (222, 224, 230)


def _light(colour: tuple, keep: int = 4) -> tuple:
    """A pale tint of colour: 1/keep of it over white."""
    return tuple(c // keep + 255 - 255 // keep for c in colour)


def _top_bar(
    draw: ImageDraw.ImageDraw,
    rng: random.Random,
    w: int,
    bar_h: int,
    colour: tuple,
    app: str,
    links: tuple[str, ...] = (),
    hamburger: bool = False,
) -> None:
    """A solid coloured application bar: optional menu icon, app name, optional links, Help and an avatar."""
    draw.rectangle((0, 0, w, bar_h - 1), fill=colour)
    x = 24
    if hamburger:
        for k in range(3):
            draw.rectangle((x, bar_h / 2 - 8 + 7 * k, x + 20, bar_h / 2 - 6 + 7 * k), fill=WHITE)
        x += 40
    _text(draw, (x, bar_h / 2), app, 20, WHITE, "lm", bold=True)
    x += _font(20).getlength(app) + 44
    for k, link in enumerate(links):
        _text(draw, (x, bar_h / 2), link, 15, WHITE, "lm", bold=k == 0)
        if k == 0:
            draw.rectangle((x, bar_h - 5, x + _font(15).getlength(link), bar_h - 1), fill=WHITE)
        x += _font(15).getlength(link) + 30
    r = 16
    draw.ellipse((w - 20 - 2 * r, bar_h / 2 - r, w - 20, bar_h / 2 + r), fill=WHITE)
    _text(draw, (w - 20 - r, bar_h / 2), rng.choice(FIRST_NAMES)[0], 15, colour, "mm", bold=True)
    _text(draw, (w - 36 - 2 * r, bar_h / 2), "Help", 14, WHITE, "rm")


def _clip(text: str, font: ImageFont.FreeTypeFont, width: float) -> str:
    """text cut at a word boundary and ended with '...' so it fits width, like a mail preview line."""
    if font.getlength(text) <= width:
        return text
    words = text.split()
    while words and font.getlength(" ".join(words) + "...") > width:
        words.pop()
    return " ".join(words).rstrip(",.") + "..."


def _pill(
    draw: ImageDraw.ImageDraw,
    cx: float,
    cy: float,
    text: str,
    colour: tuple,
    width: float = 62,
    bg: tuple | None = None,
) -> None:
    draw.rounded_rectangle(
        (cx - width / 2, cy - 11, cx + width / 2, cy + 11), 11, fill=bg or tuple(c // 5 + 204 for c in colour)
    )
    _text(draw, (cx, cy), text, 12, colour, "mm", max_width=width - 8)


def _button(draw: ImageDraw.ImageDraw, box: tuple, label: str, colour: tuple, filled: bool = True) -> None:
    draw.rounded_rectangle(box, 6, fill=colour if filled else WHITE, outline=colour, width=2)
    _text(
        draw,
        ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2),
        label,
        15,
        WHITE if filled else colour,
        "mm",
        max_width=box[2] - box[0] - 12,
        bold=filled,
    )


def _field(draw: ImageDraw.ImageDraw, box: tuple, text: str, placeholder: bool = True) -> None:
    draw.rounded_rectangle(box, 6, fill=WHITE, outline=(190, 194, 200), width=1)
    _text(
        draw,
        (box[0] + 12, (box[1] + box[3]) / 2),
        text,
        14,
        (150, 150, 155) if placeholder else INK,
        "lm",
        max_width=box[2] - box[0] - 24,
    )


_PRODUCTS = (
    "Desk lamp",
    "Office chair",
    "Notebook A5",
    "Stapler",
    "Monitor arm",
    "Keyboard",
    "Mouse pad",
    "Whiteboard",
    "Paper tray",
    "USB-C cable",
    "Headset",
    "Filing box",
    "Desk organiser",
    "Webcam",
)


def _ui_inventory(rng: random.Random, img: Image.Image, accent: tuple) -> str:
    """Table view: top bar, side menu on the left, toolbar, a full-width product table with status pills."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    bar_h, side_w = 56, rng.randint(190, 215)
    menu = ("Dashboard", "Products", "Orders", "Suppliers", "Reports", "Settings")
    _top_bar(draw, rng, w, bar_h, accent, "Inventory Manager")
    draw.rectangle((0, bar_h, side_w, h), fill=(236, 238, 242))
    for i, item in enumerate(menu):
        y = bar_h + 20 + i * 44
        if i == 1:
            draw.rectangle((0, y, side_w, y + 38), fill=_light(accent))
            draw.rectangle((0, y, 4, y + 38), fill=accent)
        _text(draw, (28, y + 19), item, 15, accent if i == 1 else _MUTED, "lm", bold=i == 1)
    x0, x1 = side_w + 28, w - 28
    _text(draw, (x0, bar_h + 20), "Products", 24, INK, bold=True)
    fy = bar_h + 64
    _field(draw, (x0, fy, x0 + 300, fy + 38), "Search products...")
    _field(draw, (x0 + 316, fy, x0 + 456, fy + 38), "All categories")
    _button(draw, (x1 - 140, fy, x1, fy + 38), "Add product", accent)
    ty, row_h = fy + 56, 38
    rows = int((h - ty - 60) // row_h) - 1
    cols = (("Product", 0.0), ("SKU", 0.30), ("Category", 0.45), ("In stock", 0.64), ("Price", 0.76), ("Status", 0.88))
    tw = x1 - x0
    draw.rectangle((x0, ty, x1, ty + row_h * (rows + 1)), fill=WHITE, outline=_LINE)
    draw.rectangle((x0 + 1, ty + 1, x1 - 1, ty + row_h), fill=(240, 241, 244))
    for name, at in cols:
        _text(draw, (x0 + 14 + at * tw, ty + row_h / 2), name, 13, GREY_TEXT, "lm", bold=True)
    stock_states = (("In stock", (44, 160, 44)), ("Low", (230, 140, 20)), ("Out", (214, 39, 40)))
    for r, item in enumerate(rng.sample(_PRODUCTS, rows)):
        y = ty + row_h * (r + 1)
        draw.line((x0 + 1, y, x1 - 1, y), fill=(235, 236, 240))
        stock = rng.choice((0, rng.randint(1, 9), rng.randint(10, 400), rng.randint(10, 400)))
        state = stock_states[0 if stock >= 10 else 1 if stock else 2]
        cells = (
            item,
            f"SK-{rng.randint(1000, 9999)}",
            rng.choice(("Furniture", "Stationery", "Electronics")),
            str(stock),
            f"${rng.randint(150, 25000) / 100:.2f}",
        )
        for (_name, at), cell in zip(cols, cells):
            _text(draw, (x0 + 14 + at * tw, y + row_h / 2), cell, 14, INK if at == 0 else _MUTED, "lm")
        _pill(draw, x0 + 14 + 0.88 * tw + 34, y + row_h / 2, state[0], state[1])
    py = ty + row_h * (rows + 1) + 16
    _text(draw, (x0, py + 14), f"Showing 1-{rows} of {rng.randint(120, 480)} products", 13, GREY_TEXT, "lm")
    for k, label in enumerate(("<", "1", "2", "3", ">")):
        bx = x1 - 36 * (5 - k)
        draw.rounded_rectangle(
            (bx, py, bx + 30, py + 28),
            5,
            fill=accent if label == "1" else WHITE,
            outline=accent if label == "1" else _LINE,
        )
        _text(draw, (bx + 15, py + 14), label, 13, WHITE if label == "1" else _MUTED, "mm")
    return (
        f"UI screenshot of the 'Inventory Manager' app: top bar, left side menu with 'Products' selected, "
        f"search and filter fields, an 'Add product' button and a product table with {rows} rows and "
        f"stock status pills"
    )


def _ui_mailbox(rng: random.Random, img: Image.Image, accent: tuple) -> str:
    """Three-pane mail client: folder list, message list with one selected message, reading pane."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    bar_h, folder_w, list_w = 50, 176, rng.randint(300, 340)
    _top_bar(draw, rng, w, bar_h, accent, "Mailbox", hamburger=True)
    _field(draw, (250, 9, 250 + 300, bar_h - 9), "Search mail...")
    draw.rectangle((0, bar_h, w, h), fill=WHITE)
    draw.rectangle((0, bar_h, folder_w, h), fill=(244, 245, 248))
    _button(draw, (16, bar_h + 16, folder_w - 16, bar_h + 56), "Compose", accent)
    folders = ("Inbox", "Starred", "Sent", "Drafts", "Archive", "Spam", "Trash")
    for i, name in enumerate(folders):
        y = bar_h + 76 + i * 36
        if i == 0:
            draw.rounded_rectangle((8, y, folder_w - 8, y + 30), 15, fill=_light(accent))
        _text(draw, (26, y + 15), name, 14, accent if i == 0 else _MUTED, "lm", bold=i == 0)
        if i in (0, 3):
            _text(draw, (folder_w - 22, y + 15), str(rng.randint(2, 40)), 12, GREY_TEXT, "rm")
    lx0, lx1 = folder_w, folder_w + list_w
    draw.line((lx0, bar_h, lx0, h), fill=_LINE)
    draw.line((lx1, bar_h, lx1, h), fill=_LINE)
    row_h = 72
    selected = rng.randrange(1, 4)
    senders = [_name(rng) for _ in range((h - bar_h) // row_h + 1)]
    subjects = [
        f"{rng.choice(('', '', 'Re: ', 'Fwd: '))}The {rng.choice(_WORDS['adj'])} {rng.choice(_WORDS['noun'])}"
        for _ in senders
    ]
    for r, (sender, subject) in enumerate(zip(senders, subjects)):
        y = bar_h + r * row_h
        if r == selected:
            draw.rectangle((lx0 + 1, y, lx1 - 1, y + row_h), fill=_light(accent, 6))
            draw.rectangle((lx0 + 1, y, lx0 + 4, y + row_h), fill=accent)
        unread = r < 3 and r != selected
        _text(draw, (lx0 + 18, y + 16), sender, 14, INK, "lm", bold=unread)
        _text(draw, (lx1 - 14, y + 16), f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}", 12, GREY_TEXT, "rm")
        _text(draw, (lx0 + 18, y + 36), subject, 13, INK, "lm", max_width=list_w - 36, bold=unread)
        _text(draw, (lx0 + 18, y + 55), _clip(_sentence(rng), _font(12), list_w - 36), 12, GREY_TEXT, "lm")
        draw.line((lx0 + 1, y + row_h, lx1 - 1, y + row_h), fill=(236, 237, 241))
    rx0, rx1 = lx1 + 28, w - 28
    subject = subjects[selected]
    _text(draw, (rx0, bar_h + 26), subject, 22, INK, bold=True, max_width=rx1 - rx0)
    draw.ellipse((rx0, bar_h + 70, rx0 + 40, bar_h + 110), fill=_light(accent, 2))
    who = senders[selected]
    _text(draw, (rx0 + 20, bar_h + 90), who[0], 16, WHITE, "mm", bold=True)
    _text(draw, (rx0 + 54, bar_h + 80), who, 14, INK, "lm", bold=True)
    _text(draw, (rx0 + 54, bar_h + 100), "to me", 12, GREY_TEXT, "lm")
    _text(draw, (rx1, bar_h + 80), _date(rng), 12, GREY_TEXT, "rm")
    body, y = _font(14), bar_h + 134
    for _ in range(3):
        for line in _wrap(_paragraph(rng, 2, 3), body, rx1 - rx0):
            if y > h - 90:
                break
            draw.text((rx0, y), line, font=body, fill=_MUTED)
            y += 21
        y += 12
    y = min(y, h - 70)
    _button(draw, (rx0, y + 10, rx0 + 100, y + 46), "Reply", accent, filled=False)
    _button(draw, (rx0 + 114, y + 10, rx0 + 224, y + 46), "Forward", accent, filled=False)
    return (
        f"UI screenshot of the 'Mailbox' app: top bar with search, folder list with a Compose button, "
        f"a list of {len(senders)} messages with one selected and a reading pane showing '{subject}'"
    )


_TASKS = (
    "Update the onboarding guide",
    "Fix login timeout",
    "Design the new invoice",
    "Review Q3 budget",
    "Migrate the database",
    "Write release notes",
    "Plan the team offsite",
    "Test the mobile layout",
    "Call the supplier",
    "Clean up old tickets",
    "Draft the press release",
    "Order new laptops",
    "Prepare the board slides",
    "Translate the help pages",
    "Renew SSL certificate",
    "Audit user access",
)


def _ui_kanban(rng: random.Random, img: Image.Image, accent: tuple) -> str:
    """Kanban board: top bar, a tab strip, four columns of task cards; no side menu."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    bar_h, tab_h = 60, 46
    _top_bar(draw, rng, w, bar_h, accent, "Project Tracker")
    draw.rectangle((0, bar_h, w, bar_h + tab_h), fill=WHITE)
    draw.line((0, bar_h + tab_h, w, bar_h + tab_h), fill=_LINE)
    x = 28
    for k, tab in enumerate(("Board", "List", "Timeline", "Calendar", "Files")):
        _text(draw, (x, bar_h + tab_h / 2), tab, 15, accent if k == 0 else _MUTED, "lm", bold=k == 0)
        if k == 0:
            draw.rectangle((x - 6, bar_h + tab_h - 4, x + _font(15).getlength(tab) + 6, bar_h + tab_h), fill=accent)
        x += _font(15).getlength(tab) + 40
    _button(draw, (w - 150, bar_h + 7, w - 24, bar_h + tab_h - 7), "New task", accent)
    columns = ("Backlog", "To do", "In progress", "Done")
    dots = ((150, 150, 160), (31, 119, 180), (230, 140, 20), (44, 160, 44))
    tags = (("Design", (140, 80, 200)), ("Bug", (214, 39, 40)), ("Docs", (23, 160, 190)), ("Ops", (230, 140, 20)))
    gap, top = 16, bar_h + tab_h + 18
    col_w = (w - 2 * 24 - gap * (len(columns) - 1)) / len(columns)
    tasks = rng.sample(_TASKS, len(_TASKS))
    counts = []
    for c, (name, dot) in enumerate(zip(columns, dots)):
        cx = 24 + c * (col_w + gap)
        n = rng.randint(1, 4)
        counts.append(n)
        card_h = 92
        bottom = min(h - 16, top + 44 + n * (card_h + 10) + 6)
        draw.rounded_rectangle((cx, top, cx + col_w, bottom), 10, fill=(234, 236, 240))
        draw.ellipse((cx + 14, top + 16, cx + 24, top + 26), fill=dot)
        _text(draw, (cx + 32, top + 21), name, 14, INK, "lm", bold=True)
        _text(draw, (cx + col_w - 14, top + 21), str(n), 13, GREY_TEXT, "rm")
        for k in range(n):
            y = top + 44 + k * (card_h + 10)
            if y + card_h > h - 20:
                break
            draw.rounded_rectangle((cx + 8, y, cx + col_w - 8, y + card_h), 8, fill=WHITE, outline=_LINE)
            tag, colour = rng.choice(tags)
            _pill(draw, cx + 50, y + 20, tag, colour, 64)
            _text(draw, (cx + 20, y + 48), tasks.pop(), 14, INK, "lm", max_width=col_w - 40)
            _text(draw, (cx + 20, y + 74), f"Due {rng.choice(MONTHS)} {rng.randint(1, 28)}", 12, GREY_TEXT, "lm")
            ax = cx + col_w - 34
            draw.ellipse((ax, y + 62, ax + 24, y + 86), fill=_light(rng.choice(SATURATED), 2))
            _text(draw, (ax + 12, y + 74), rng.choice(FIRST_NAMES)[0], 12, WHITE, "mm", bold=True)
    return (
        f"UI screenshot of the 'Project Tracker' app: top bar, a tab strip with 'Board' selected and a "
        f"kanban board with {len(columns)} columns ({', '.join(columns)}) holding {sum(counts)} task cards"
    )


def _ui_analytics(rng: random.Random, img: Image.Image, accent: tuple) -> str:
    """Dark-theme analytics dashboard: top bar, narrow icon rail, KPI cards, a bar chart and a top-products list."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    bg, panel, text, muted = (24, 26, 33), (37, 40, 50), (235, 236, 240), (150, 154, 165)
    img.paste(bg, (0, 0, w, h))
    bar_h, rail = 52, 64
    _top_bar(draw, rng, w, bar_h, accent, "Shop Admin", links=("Analytics", "Orders", "Customers", "Catalogue"))
    draw.rectangle((0, bar_h, rail, h), fill=(16, 18, 23))
    for k in range(6):
        y = bar_h + 22 + k * 52
        if k == 0:
            draw.rounded_rectangle((10, y - 6, rail - 10, y + 34), 8, fill=(55, 60, 75))
        draw.rounded_rectangle((22, y + 4, rail - 22, y + 24), 4, outline=accent if k == 0 else muted, width=2)
    x0, x1 = rail + 26, w - 26
    _text(draw, (x0, bar_h + 22), "Sales overview", 22, text, bold=True)
    _field(draw, (x1 - 190, bar_h + 16, x1, bar_h + 50), "Last 14 days")
    kpis = (
        ("Revenue", f"${rng.randint(12, 98)},{rng.randint(100, 999)}"),
        ("Orders", f"{rng.randint(300, 2400):,}"),
        ("Visitors", f"{rng.randint(8, 60)},{rng.randint(100, 999)}"),
        ("Conversion", f"{rng.uniform(1, 5):.1f}%"),
    )
    ky, kh, gap = bar_h + 68, 86, 16
    kw = (x1 - x0 - gap * (len(kpis) - 1)) / len(kpis)
    for k, (label, value) in enumerate(kpis):
        kx = x0 + k * (kw + gap)
        draw.rounded_rectangle((kx, ky, kx + kw, ky + kh), 8, fill=panel)
        _text(draw, (kx + 16, ky + 20), label, 13, muted, "lm")
        _text(draw, (kx + 16, ky + 50), value, 24, text, "lm", bold=True)
        up = rng.random() < 0.7
        _text(
            draw,
            (kx + kw - 14, ky + 20),
            f"{'+' if up else '-'}{rng.uniform(1, 15):.1f}%",
            12,
            (80, 200, 120) if up else (240, 90, 90),
            "rm",
            bold=True,
        )
    cy = ky + kh + gap
    cw = (x1 - x0) * 0.62
    draw.rounded_rectangle((x0, cy, x0 + cw, h - 22), 8, fill=panel)
    _text(draw, (x0 + 16, cy + 22), "Revenue per day", 15, text, "lm", bold=True)
    left, right, top, bottom = x0 + 24, x0 + cw - 20, cy + 54, h - 52
    values = [rng.uniform(0.3, 1.0) for _ in range(14)]
    for k in range(4):
        gy = bottom - k * (bottom - top) / 3
        draw.line((left, gy, right, gy), fill=(58, 62, 75))
    slot = (right - left) / len(values)
    for k, v in enumerate(values):
        bx = left + k * slot + slot * 0.18
        draw.rectangle((bx, bottom - v * (bottom - top), bx + slot * 0.64, bottom), fill=accent)
        if k % 2 == 0:
            _text(draw, (bx + slot * 0.32, bottom + 8), str(k + 1), 11, muted, "ma")
    px0 = x0 + cw + gap
    draw.rounded_rectangle((px0, cy, x1, h - 22), 8, fill=panel)
    _text(draw, (px0 + 16, cy + 22), "Top products", 15, text, "lm", bold=True)
    shares = sorted((rng.uniform(0.25, 1.0) for _ in range(5)), reverse=True)
    for k, (item, share) in enumerate(zip(rng.sample(_PRODUCTS, 5), shares)):
        y = cy + 56 + k * ((h - 22 - cy - 70) / 5)
        _text(draw, (px0 + 16, y + 6), item, 13, text, "lm", max_width=x1 - px0 - 90)
        _text(draw, (x1 - 16, y + 6), f"{int(share * 400)}", 13, muted, "rm")
        draw.rounded_rectangle((px0 + 16, y + 20, x1 - 16, y + 26), 3, fill=(58, 62, 75))
        draw.rounded_rectangle((px0 + 16, y + 20, px0 + 16 + share * (x1 - px0 - 32), y + 26), 3, fill=accent)
    return (
        "UI screenshot of the 'Shop Admin' app in a dark theme: top bar with navigation links, an icon rail, "
        f"{len(kpis)} KPI cards, a bar chart of revenue per day and a top-products list"
    )


def _ui_portal(rng: random.Random, img: Image.Image, accent: tuple) -> str:
    """Patient portal: tall top bar with links, a hero banner, a booking form and an appointments list."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    bar_h = 64
    _top_bar(draw, rng, w, bar_h, accent, "Health Portal", links=("Home", "Appointments", "Messages", "Billing"))
    hero_h = rng.randint(150, 170)
    draw.rectangle((0, bar_h, w, bar_h + hero_h), fill=_light(accent, 3))
    name = rng.choice(FIRST_NAMES)
    month = rng.randrange(8)
    visits = sorted((month + k, rng.randint(1, 28)) for k in range(4))  # the next visits, a month or more apart
    _text(draw, (48, bar_h + 40), f"Welcome back, {name}", 28, INK, bold=True)
    _text(draw, (48, bar_h + 82), f"Your next visit is on {MONTH_NAMES[month]} {visits[0][1]}", 15, _MUTED)
    _button(draw, (48, bar_h + hero_h - 52, 198, bar_h + hero_h - 16), "Book visit", accent)
    hx = w - 230  # a simple illustration: a calendar card in the banner
    draw.rounded_rectangle((hx, bar_h + 24, hx + 150, bar_h + hero_h - 20), 10, fill=WHITE)
    draw.rounded_rectangle((hx, bar_h + 24, hx + 150, bar_h + 54), 10, fill=accent)
    draw.rectangle((hx, bar_h + 44, hx + 150, bar_h + 54), fill=accent)
    _text(draw, (hx + 75, bar_h + 39), MONTHS[month].upper(), 14, WHITE, "mm", bold=True)
    _text(draw, (hx + 75, bar_h + (34 + hero_h) / 2), str(visits[0][1]), 40, INK, "mm", bold=True)
    top, gap, x0, x1 = bar_h + hero_h + 24, 24, 48, w - 48
    fw = (x1 - x0) * 0.52
    draw.rectangle((0, bar_h + hero_h, w, h), fill=(247, 248, 250))
    draw.rounded_rectangle((x0, top, x0 + fw, h - 24), 10, fill=WHITE, outline=_LINE)
    _text(draw, (x0 + 20, top + 24), "Book an appointment", 17, INK, "lm", bold=True)
    half, y = (fw - 60) / 2, top + 50
    fields = (  # label, value, box (two half-width inputs side by side, then a full-width text area)
        ("Doctor", f"Dr. {rng.choice(LAST_NAMES)}", (x0 + 20, y + 20, x0 + 20 + half, y + 58)),
        (
            "Date",
            f"{MONTH_NAMES[visits[-1][0] + 1]} {rng.randint(1, 28)}",
            (x0 + 40 + half, y + 20, x0 + fw - 20, y + 58),
        ),
        ("Reason", "Describe your symptoms...", (x0 + 20, y + 90, x0 + fw - 20, y + 160)),
    )
    for label, value, box in fields:
        _text(draw, (box[0], box[1] - 20), label, 13, _MUTED, bold=True)
        _field(draw, box, value, placeholder=label == "Reason")
    by = y + 176
    if by + 38 < h - 36:
        _button(draw, (x0 + 20, by, x0 + 170, by + 38), "Confirm", accent)
        _button(draw, (x0 + 184, by, x0 + 300, by + 38), "Clear", accent, filled=False)
    ax0 = x0 + fw + gap
    draw.rounded_rectangle((ax0, top, x1, h - 24), 10, fill=WHITE, outline=_LINE)
    _text(draw, (ax0 + 20, top + 24), "Upcoming appointments", 17, INK, "lm", bold=True)
    n = max(2, min(4, int((h - 24 - top - 60) // 58)))
    for k in range(n):
        y = top + 52 + k * 58
        draw.rounded_rectangle((ax0 + 20, y, ax0 + 66, y + 46), 6, fill=_light(accent, 4))
        _text(draw, (ax0 + 43, y + 15), MONTHS[visits[k][0]], 11, accent, "mm", bold=True)
        _text(draw, (ax0 + 43, y + 32), str(visits[k][1]), 16, INK, "mm", bold=True)
        _text(draw, (ax0 + 80, y + 14), f"Dr. {_name(rng)}", 14, INK, "lm", bold=True, max_width=x1 - ax0 - 190)
        _text(
            draw,
            (ax0 + 80, y + 34),
            rng.choice(("Check-up", "Blood test", "Dentist", "Physiotherapy", "Eye exam")),
            13,
            GREY_TEXT,
            "lm",
        )
        _pill(draw, x1 - 60, y + 23, rng.choice(("Confirmed", "Pending")), accent, 80)
    return (
        f"UI screenshot of the 'Health Portal' app: top bar with links, a hero banner welcoming {name}, "
        f"an appointment booking form and a list of {n} upcoming appointments"
    )


_UI_LAYOUTS = (  # renderer, accent colour
    (_ui_inventory, (31, 119, 180)),
    (_ui_mailbox, (214, 39, 40)),
    (_ui_kanban, (44, 160, 44)),
    (_ui_analytics, (140, 80, 200)),
    (_ui_portal, (23, 130, 160)),
)


def _ui_screenshot(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    renderer, accent = _UI_LAYOUTS[(index - 1) % len(_UI_LAYOUTS)]
    w, h = rng.choice(((1024, 640), (1024, 640), (1080, 675), (960, 600)))
    img = Image.new("RGB", (w, h), (246, 247, 249))
    return img, renderer(rng, img, accent)


# -------------------------------------------------------------------------------------------- receipt


def _mono(draw: ImageDraw.ImageDraw, x: float, y: float, text: str, pitch: float, size: int, fill, bold=False):
    """Draw text on a fixed character grid, so columns line up like a till printer's."""
    font = _font(size)
    for i, ch in enumerate(text):
        if ch != " ":
            for dx in (0, 1) if bold else (0,):
                draw.text((x + i * pitch + pitch / 2 + dx, y), ch, font=font, fill=fill, anchor="ma")


_STORES = (
    (
        "CORNER MARKET",
        (
            "Milk 1L",
            "Bread",
            "Eggs x12",
            "Butter",
            "Apples",
            "Bananas",
            "Cheddar",
            "Coffee",
            "Rice 1kg",
            "Pasta",
            "Tomatoes",
            "Olive oil",
            "Yoghurt",
            "Orange juice",
            "Onions",
            "Chicken",
            "Cereal",
            "Tea bags",
            "Soap",
            "Tissues",
            "Chocolate",
            "Carrots",
            "Honey",
        ),
    ),
    (
        "GREEN LEAF CAFE",
        (
            "Latte",
            "Cappuccino",
            "Espresso",
            "Flat white",
            "Green tea",
            "Croissant",
            "Bagel",
            "Muffin",
            "Avocado toast",
            "Soup of day",
            "Club sandwich",
            "Salad bowl",
            "Brownie",
            "Lemonade",
            "Iced tea",
            "Cookie",
            "Scone",
            "Water",
            "Hot chocolate",
            "Pancakes",
        ),
    ),
)


def _receipt(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    store, goods = _STORES[(index - 1) % len(_STORES)]
    w, h = rng.randint(340, 380), rng.randint(900, 1100)
    img = Image.new("RGB", (w, h), (250, 248, 241))
    draw = ImageDraw.Draw(img)
    pitch, size, lh, ink = 9.0, 15, 22, (45, 45, 50)
    cols = int((w - 24) // pitch)
    x0 = (w - cols * pitch) / 2
    y = 30

    def row(text: str = "", bold: bool = False) -> None:
        nonlocal y
        _mono(draw, x0, y, text[:cols], pitch, size, ink, bold)
        y += lh

    def pair(left: str, right: str, bold: bool = False) -> None:
        row(left[: cols - len(right) - 1].ljust(cols - len(right)) + right, bold)

    row(store.center(cols), bold=True)
    row(f"{rng.randint(1, 299)} {rng.choice(('HIGH ST', 'MILL RD', 'PARK AVE', 'KING ST'))}".center(cols))
    row(f"TEL {rng.randint(200, 999)}-{rng.randint(1000, 9999)}".center(cols))
    row("-" * cols)
    pair(
        f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(2019, 2024)}",
        f"{rng.randint(7, 21):02d}:{rng.randint(0, 59):02d}",
    )
    pair(f"TILL {rng.randint(1, 6)}", f"No. {rng.randint(1000, 9999)}")
    row("-" * cols)
    footer_lines = 12
    budget = (h - y - 110) // lh - footer_lines  # item lines that fit above the totals and barcode
    total_cents, n_items = 0, 0
    for item in rng.sample(goods, len(goods)):
        qty = 1 if rng.random() < 0.75 else rng.randint(2, 4)
        unit = rng.randint(59, 899)
        needed = 2 if qty > 1 else 1
        if budget < needed:
            break
        budget -= needed
        pair(item.upper(), f"{qty * unit / 100:.2f}")
        if qty > 1:
            row(f"  {qty} @ {unit / 100:.2f}")
        total_cents += qty * unit
        n_items += 1
    tax = round(total_cents * 0.08)
    row("-" * cols)
    pair("SUBTOTAL", f"{total_cents / 100:.2f}")
    pair("TAX 8%", f"{tax / 100:.2f}")
    pair("TOTAL", f"{(total_cents + tax) / 100:.2f}", bold=True)
    row("=" * cols)
    pair(
        rng.choice(("VISA", "MASTERCARD", "DEBIT")) + f" ****{rng.randint(1000, 9999)}",
        f"{(total_cents + tax) / 100:.2f}",
    )
    pair("AUTH CODE", f"{rng.randint(100000, 999999)}")
    pair("ITEMS", str(n_items))
    row()
    row("THANK YOU - COME AGAIN".center(cols))
    row("PLEASE KEEP YOUR RECEIPT".center(cols))
    y += 14
    x = x0 + 20
    while x < w - x0 - 24:  # barcode
        bar = rng.choice((1, 2, 3))
        draw.rectangle((x, y, x + bar - 1, y + 56), fill=INK)
        x += bar + rng.choice((1, 2, 3))
    _mono(draw, x0, y + 62, f"{rng.randint(10**11, 10**12 - 1)}".center(cols), pitch, 13, ink)
    return img, f"till receipt from {store.title()} with {n_items} items, tax and total, dashed separators"


# ----------------------------------------------------------------------------------------------- icon


def _icon(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    base, mark, extra = rng.sample(SATURATED, 2) + [WHITE]
    if rng.random() < 0.5:  # light tile with coloured marks, or coloured tile with white marks
        base, mark, extra = WHITE, base, mark
    img = Image.new("RGB", (96, 96), base)
    draw = ImageDraw.Draw(img)
    design = rng.choice(("ring_triangle", "stacked_squares", "hexagon_dot"))
    if design == "ring_triangle":
        draw.ellipse((12, 12, 84, 84), fill=mark)
        draw.ellipse((22, 22, 74, 74), fill=base)
        draw.polygon([(40, 32), (40, 64), (66, 48)], fill=extra)
    elif design == "stacked_squares":
        draw.rounded_rectangle((16, 16, 60, 60), 8, fill=mark)
        draw.rounded_rectangle((36, 36, 80, 80), 8, fill=extra)
    else:
        draw.polygon(
            [(48 + 36 * math.cos(a), 48 + 36 * math.sin(a)) for a in (math.pi / 6 + k * math.pi / 3 for k in range(6))],
            fill=mark,
        )
        draw.ellipse((34, 34, 62, 62), fill=extra)
    shapes = {
        "ring_triangle": "a ring around a triangle",
        "stacked_squares": "two overlapping rounded squares",
        "hexagon_dot": "a hexagon with a dot",
    }[design]
    return img, f"flat logo-like icon: {shapes} in 3 colours on a plain square, no text"


_RENDERERS: dict[str, Callable[[random.Random, int], tuple[Image.Image, str]]] = {
    "bar_chart": _bar_chart,
    "line_chart": _line_chart,
    "pie_chart": _pie_chart,
    "scatter_plot": _scatter_plot,
    "document": _document,
    "table": _table,
    "flowchart": _flowchart,
    "tree_diagram": _tree_diagram,
    "network_diagram": _network_diagram,
    "ui_screenshot": _ui_screenshot,
    "receipt": _receipt,
    "icon": _icon,
}


def render_demo_images(out_dir: Path) -> list[RenderedImage]:
    """Render the 41 synthetic demo images into out_dir and return them ordered by kind (KINDS order) then index."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rendered = []
    for kind in KINDS:
        for index in range(1, _COUNTS[kind] + 1):
            img, description = _RENDERERS[kind](random.Random(_seed(kind, index)), index)
            img = img.convert("RGB")
            if kind in _JPEG_KINDS:
                path = out_dir / f"{kind}-{index:02d}.jpg"
                img.save(path, "JPEG", quality=90)
            else:
                path = out_dir / f"{kind}-{index:02d}.png"
                img.save(path, "PNG")
            rendered.append(RenderedImage(path=path, kind=kind, description=description))
    return rendered


INDEX_NAME = "IMAGES.jsonl"
LICENSE = "CC0-1.0"  # drawn by this script, so ours to dedicate


def write_index(images: list[RenderedImage], out_dir: Path) -> Path:
    """Write `IMAGES.jsonl` (one row per image, in render order) beside the images and return its path."""
    path = Path(out_dir) / INDEX_NAME
    with open(path, "w", encoding="utf-8") as handle:
        for image in images:
            with Image.open(image.path) as opened:
                shape = {"format": opened.format, "width": opened.width, "height": opened.height}
            row = {
                "file": image.path.name,
                "kind": image.kind,
                "description": image.description,
                **shape,
                "license": LICENSE,
                "sha256": hashlib.sha256(image.path.read_bytes()).hexdigest(),
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    """Render every demo image and its index into OUT_DIR."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="folder to write (curation/demo/rendered)")
    out_dir = parser.parse_args(argv).out_dir
    images = render_demo_images(out_dir)
    print(f"{len(images)} images and {write_index(images, out_dir).name} written to {out_dir}")


if __name__ == "__main__":
    main()
