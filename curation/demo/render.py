"""Deterministic synthetic images for the demo corpus: charts, documents, diagrams, UI mock-ups, receipts, an icon.

Everything is drawn with Pillow from a per-image ``random.Random`` seeded by (kind, index), so the bytes written
are identical on every call. Nothing is read from disk or the network; text uses Pillow's bundled font.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from PIL import Image, ImageDraw, ImageFont

__all__ = ["KINDS", "RenderedImage", "render_demo_images"]


@dataclass(frozen=True)
class RenderedImage:
    path: Path  # where it was written
    kind: str  # one of KINDS
    description: str  # one line saying what it shows


KINDS = ("bar_chart", "line_chart", "pie_chart", "scatter_plot", "document", "table", "flowchart",
         "tree_diagram", "network_diagram", "ui_screenshot", "receipt", "icon")

_COUNTS = {"bar_chart": 5, "line_chart": 4, "pie_chart": 3, "scatter_plot": 2, "document": 7, "table": 3,
           "flowchart": 4, "tree_diagram": 3, "network_diagram": 2, "ui_screenshot": 5, "receipt": 2, "icon": 1}
_JPEG_KINDS = frozenset({"document", "receipt"})

WHITE = (255, 255, 255)
INK = (25, 25, 25)
GREY_TEXT = (110, 110, 110)
GRID = (228, 228, 228)
SATURATED = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (140, 80, 200),
             (23, 160, 190), (227, 80, 160))
PASTELS = ((198, 219, 239), (253, 218, 180), (204, 235, 197), (222, 218, 240), (255, 240, 170), (250, 205, 215))

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December")
FIRST_NAMES = ("Alice", "Ben", "Chloe", "David", "Emma", "Farid", "Grace", "Hugo", "Ines", "James", "Kira",
               "Liam", "Maya", "Noah", "Olivia", "Priya", "Rosa", "Sam", "Tom", "Yuki")
LAST_NAMES = ("Adams", "Baker", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Hughes", "Ito", "Khan",
              "Lopez", "Moreau", "Novak", "Okafor", "Patel", "Rossi", "Silva", "Turner", "Weber", "Young")
CITIES = ("Lisbon", "Oslo", "Denver", "Madrid", "Toronto", "Cairo", "Seoul")
CITY_MEAN_C = {"Lisbon": 17.5, "Oslo": 6.5, "Denver": 10.5, "Madrid": 15.0, "Toronto": 9.0, "Cairo": 22.5,
               "Seoul": 12.5}  # rough annual means, so the temperature lines are plausible


def _seed(kind: str, index: int) -> int:
    # crc32 rather than hash(): str hashes are salted per process and would break reproducibility.
    return zlib.crc32(f"{kind}:{index}".encode())


# --------------------------------------------------------------------------------------------------- text

@lru_cache(maxsize=None)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _fit(text: str, size: int, max_width: float, min_size: int = 8) -> ImageFont.FreeTypeFont:
    while size > min_size and _font(size).getlength(text) > max_width:
        size -= 1
    return _font(size)


def _text(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int = 14, fill=INK,
          anchor: str = "la", max_width: float | None = None, bold: bool = False) -> None:
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
    "noun": ("report", "team", "budget", "schedule", "office", "customer", "project", "meeting", "policy",
             "committee", "system", "review", "supplier", "account", "record", "request", "program",
             "building", "plan", "survey", "result", "member", "service", "order", "delivery", "manager",
             "district", "library", "garden", "proposal", "deadline", "contract", "workshop", "station"),
    "adj": ("annual", "new", "current", "local", "final", "quarterly", "public", "small", "regional", "early",
            "revised", "simple", "weekly", "central", "shared", "detailed", "monthly", "internal"),
    "verb": ("reviewed", "approved", "updated", "prepared", "discussed", "supported", "completed", "described",
             "received", "improved", "confirmed", "planned", "shared", "checked", "reduced", "extended"),
    "prep": ("for", "with", "after", "before", "during", "from", "about", "within", "across"),
    "adv": ("carefully", "recently", "again", "quickly", "together", "as expected", "on time", "in full"),
    "opener": ("In addition,", "However,", "As a result,", "For this reason,", "At the same time,",
               "Last month,", "In general,", "As agreed,"),
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


def _axes(img: Image.Image, title: str, xlabel: str, ylabel: str, xlim: tuple[float, float],
          yticks: list[float], xticks: list[tuple[float, str]], legend_w: int) -> _Plot:
    """Title, black axes with ticks and numeric labels, axis titles, light y grid; returns the data mapping."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    _text(draw, (w / 2, 16), title, 20, anchor="ma", max_width=w - 40, bold=True)
    label_w = max(_font(12).getlength(_fmt(t)) for t in yticks)
    plot = _Plot(left=48 + label_w, top=62, right=w - 28 - legend_w, bottom=h - 70,
                 x0=xlim[0], x1=xlim[1], y0=yticks[0], y1=yticks[-1])
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
    ("Quarterly revenue by region", "Quarter", "Revenue ($ thousands)", ("Q1", "Q2", "Q3", "Q4"),
     ("North", "South", "East", "West", "Central"), "regions", (80, 400), "quarterly revenue"),
    ("Monthly rainfall in {city}", "Month", "Rainfall (mm)", MONTHS, (), "", (8, 160), "monthly rainfall"),
    ("Units sold by product", "Product", "Units sold", ("Laptop", "Tablet", "Phone", "Monitor", "Printer"),
     ("2021", "2022", "2023"), "years", (150, 1200), "units sold per product"),
    ("How staff commute to work", "Mode of transport", "Respondents",
     ("Car", "Bus", "Train", "Bicycle", "Walking", "Other"), (), "", (5, 120), "survey answers on commuting"),
    ("Average exam score by subject", "Subject", "Score (out of 100)",
     ("Maths", "Physics", "History", "English", "Biology"), ("Class A", "Class B", "Class C"), "classes",
     (55, 95), "average exam scores per subject"),
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
    plot = _axes(img, title, xlabel, ylabel, (0, len(cats)), _ticks(0, hi * 1.05),
                 [(i + 0.5, c) for i, c in enumerate(cats)], _legend_width(series if pool else []))
    draw = ImageDraw.Draw(img)
    group = 0.72 if pool else 0.6
    for s, row in enumerate(values):
        for c, value in enumerate(row):
            x = c + (1 - group) / 2 + s * group / len(series)
            draw.rectangle((plot.px(x), plot.py(value), plot.px(x + group / len(series)) - 1, plot.bottom - 1),
                           fill=colours[s])
    if pool:
        _legend(draw, plot.right + 18, plot.top, list(zip(series, colours)), img.width - plot.right - 24)
        return img, f"grouped bar chart of {what} for {len(series)} {noun} ({', '.join(series)})"
    return img, f"bar chart of {title[0].lower() + title[1:]}: {len(cats)} bars ({cats[0]} to {cats[-1]})"


_LINE_TOPICS = (  # title, x label, y label, x tick labels, series pool, base range, amplitude, trend, noise, phase
    ("Average monthly temperature", "Month", "Temperature (°C)", MONTHS, CITIES, (2, 18), 9, 0, 0.8, -1.57),
    ("Weekly website visitors", "Week", "Visitors", tuple(str(i) for i in range(1, 13)),
     ("Desktop", "Mobile", "Tablet"), (900, 4000), 300, 120, 150, 0.0),
    ("Share price of {company}", "Month", "Price ($)", MONTHS, (), (40, 120), 6, 1.5, 3, 0.5),
    ("Electricity demand over a day", "Hour of day", "Demand (MW)",
     tuple(f"{h}:00" if h % 3 == 0 else "" for h in range(24)), ("Weekday", "Weekend"), (300, 500), 90, 0, 12,
     -2.0),
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
            row.append(level + scale * amp * math.sin(2 * math.pi * i / period + phase + shift) + trend * i + walk
                       + rng.gauss(0, noise))
        data.append(row)
    flat = [v for row in data for v in row]
    spread = max(flat) - min(flat)
    colours = rng.sample(SATURATED, len(series))
    img = _chart_canvas(rng)
    plot = _axes(img, title, xlabel, ylabel, (-0.5, n - 0.5),
                 _ticks(min(flat) - 0.05 * spread, max(flat) + 0.05 * spread),
                 list(enumerate(xlabels)), _legend_width(series if pool else []))
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
    title, pool = _PIE_TOPICS[(index - 1) % len(_PIE_TOPICS)]
    title = title.format(n=rng.randrange(100, 1000, 10))
    labels = _pick(rng, pool, rng.randint(3, 5))
    weights = [rng.uniform(1, 5) for _ in labels]
    shares = [round(100 * w / sum(weights)) for w in weights]
    shares[0] += 100 - sum(shares)
    colours = rng.sample(SATURATED, len(labels))
    img = _chart_canvas(rng)
    draw = ImageDraw.Draw(img)
    w, h = img.size
    _text(draw, (w / 2, 16), title, 20, anchor="ma", max_width=w - 40, bold=True)
    r = min(w, h) * 0.33
    cx, cy = w * 0.37, h * 0.55
    start = -90.0
    for share, colour in zip(shares, colours):
        end = start + 3.6 * share
        draw.pieslice((cx - r, cy - r, cx + r, cy + r), start, end, fill=colour, outline=WHITE, width=2)
        mid = math.radians((start + end) / 2)
        if share >= 6:
            _text(draw, (cx + 0.62 * r * math.cos(mid), cy + 0.62 * r * math.sin(mid)), f"{share}%", 15,
                  fill=WHITE, anchor="mm", bold=True)
        start = end
    items = [(f"{label} ({share}%)", colour) for label, share, colour in zip(labels, shares, colours)]
    _legend(draw, cx + r + 40, cy - 12 * len(items), items, w - (cx + r + 40) - 10)
    return img, f"pie chart of {title.split(' (')[0].lower()} split into {len(labels)} slices ({', '.join(labels)})"


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
    plot = _axes(img, title, xlabel, ylabel, (xt[0], xt[-1]), yt, [(v, _fmt(v)) for v in xt],
                 _legend_width(groups))
    draw = ImageDraw.Draw(img)
    for row, colour in zip(data, colours):
        for x, y in row:
            draw.ellipse((plot.px(x) - 4, plot.py(y) - 4, plot.px(x) + 4, plot.py(y) + 4), fill=colour)
    if len(groups) == 1:  # least-squares trend line
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        x0, x1 = min(xs), max(xs)
        draw.line((plot.px(x0), plot.py(my + slope * (x0 - mx)), plot.px(x1), plot.py(my + slope * (x1 - mx))),
                  fill=INK, width=2)
    else:
        _legend(draw, plot.right + 18, plot.top, list(zip(groups, colours)), img.width - plot.right - 24)
    shape = "with a trend line" if len(groups) == 1 else f"in {len(groups)} groups ({', '.join(groups)})"
    return img, f"scatter plot of {title.lower()}: {len(xs)} points {shape}"


# ------------------------------------------------------------------------------------------ documents

_DOCUMENTS = (  # title, blocks; a block is (type, argument)
    ("Memorandum", [("meta", "To: All staff"), ("meta", "From: {name}, Operations"),
                    ("meta", "Subject: Changes to the {adj} {noun}"), ("para", 0), ("para", 0), ("para", 0),
                    ("para", 0)]),
    ("Minutes of the {Adj} Committee Meeting", [("meta", "Present: {name}, {name}, {name}"),
                                                ("heading", "Discussion"), ("para", 0), ("para", 0),
                                                ("heading", "Action items"), ("list", 4), ("para", 0)]),
    ("Quarterly Project Report", [("heading", "1. Summary"), ("para", 0), ("heading", "2. Progress"),
                                  ("para", 0), ("list", 3), ("heading", "3. Next steps"), ("para", 0)]),
    ("Notice to Residents", [("para", 0), ("para", 0), ("list", 3), ("para", 0), ("para", 0)]),
    ("Application for a Community Garden Plot",
     [("para", 0), ("fields", "Full name|Address|Phone|Email|Preferred start date"), ("para", 0),
      ("fields", "Signature|Date")]),
    ("Letter of Reference", [("meta", "Dear {name},"), ("para", 0), ("para", 0), ("para", 0),
                             ("meta", "Sincerely,"), ("meta", "{name}")]),
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
    _text(draw, (margin, 70), title, 28, fill=INK, max_width=right - margin, bold=True)
    _text(draw, (margin, 116), f"Date: {_date(rng)}", 15, fill=GREY_TEXT)
    draw.line((margin, 146, right, 146), fill=(180, 180, 180), width=1)
    y, counts = 166, {"para": 0, "list": 0, "fields": 0}

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
            text = re.sub(r"\{(\w+)\}", lambda m: _name(rng) if m.group(1) == "name" else rng.choice(
                _WORDS[m.group(1)]), arg)
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
        rows = [[_name(rng), rng.choice(("Finance", "Sales", "Legal", "Engineering", "Support")),
                 f"{rng.choice('ABC')}-{rng.randint(101, 420)}", str(rng.randint(2000, 4999)),
                 str(rng.randint(1, 25))] for _ in range(n_rows)]
    elif index == 2:
        title = f"Sales by region, {rng.randint(2019, 2024)} ($)"
        header = ["Region", "Q1", "Q2", "Q3", "Q4", "Total"]
        regions = ("North", "South", "East", "West", "Central", "Coastal", "Mountain", "Metro", "Lakes",
                   "Islands", "Valley", "Plains")
        rows = []
        for region in regions[:n_rows]:
            quarters = [rng.randint(12_000, 95_000) for _ in range(4)]
            rows.append([region] + [f"{q:,}" for q in quarters] + [f"{sum(quarters):,}"])
    else:
        title = "Warehouse inventory"
        header = ["Item", "SKU", "In stock", "Unit price", "Value"]
        items = ("Desk lamp", "Office chair", "Notebook", "Stapler", "Monitor arm", "Keyboard", "Mouse pad",
                 "Whiteboard", "Paper tray", "USB cable", "Headset", "Filing box")
        rows = []
        for item in rng.sample(items, n_rows):
            stock, price = rng.randint(0, 400), rng.randint(150, 25_000) / 100
            rows.append([item, f"SK-{rng.randint(1000, 9999)}", str(stock), f"{price:.2f}",
                         f"{stock * price:,.2f}"])
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
    draw.polygon([(x1, y1)] + [(x1 - head * math.cos(angle + d), y1 - head * math.sin(angle + d)) for d in (-0.4, 0.4)],
                 fill=fill)


def _node(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, w: float, h: float, label: str, fill):
    box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
    if shape == "decision":
        draw.polygon([(cx, box[1]), (box[2], cy), (cx, box[3]), (box[0], cy)], fill=fill, outline=(70, 70, 70),
                     width=2)
    else:
        draw.rounded_rectangle(box, radius=h / 2 if shape == "terminal" else 10, fill=fill, outline=(70, 70, 70),
                               width=2)
    _text(draw, (cx, cy), label, 15, INK, "mm", max_width=w * (0.62 if shape == "decision" else 1) - 16)


_FLOWS = (  # what, steps before the decision, decision, steps after "yes", step on "no" (loops back)
    ("order handling", ["Receive order", "Check stock"], "In stock?", ["Pack items", "Ship order"],
     "Reorder from supplier"),
    ("user login", ["Open login page", "Enter password"], "Valid?", ["Load dashboard"], "Show error message"),
    ("support ticket handling", ["Ticket received", "Assign agent"], "Resolved?", ["Close ticket", "Send survey"],
     "Escalate to lead"),
    ("expense approval", ["Submit expense"], "Receipt attached?", ["Manager approves", "Pay employee"],
     "Request receipt"),
)


def _flowchart(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    what, before, decision, after, no_step = _FLOWS[(index - 1) % len(_FLOWS)]
    nodes = ([("terminal", "Start")] + [("process", s) for s in before] + [("decision", decision)]
             + [("process", s) for s in after] + [("terminal", "End")])
    spacing = rng.randint(100, 115)
    w, h = rng.randint(700, 800), 40 + len(nodes) * spacing
    bg = rng.choice((WHITE, (250, 250, 252)))
    img = Image.new("RGB", (w, h), bg)
    draw = ImageDraw.Draw(img)
    fills = rng.sample(PASTELS, rng.randint(1, 3))
    fill_of = {"terminal": fills[0], "process": fills[1 % len(fills)], "decision": fills[2 % len(fills)]}
    size_of = {"terminal": (150, 46), "process": (220, 52), "decision": (200, 84)}
    cx = w * 0.4
    centres = [20 + spacing * (i + 0.5) for i in range(len(nodes))]
    for i in range(len(nodes) - 1):
        (s0, _), (s1, _) = nodes[i], nodes[i + 1]
        _arrow(draw, [(cx, centres[i] + size_of[s0][1] / 2), (cx, centres[i + 1] - size_of[s1][1] / 2 - 1)])
    d = len(before) + 1
    dy, (dw, _) = centres[d], size_of["decision"]
    _text(draw, (cx + 10, dy + 48), "Yes", 14, INK, "la", bold=True)
    sx, sw = w * 0.78, min(190, w * 0.4)
    _arrow(draw, [(cx + dw / 2, dy), (sx - sw / 2 - 1, dy)])
    _text(draw, ((cx + dw / 2 + sx - sw / 2) / 2, dy - 8), "No", 14, INK, "ms", bold=True)
    ty = centres[d - 1]  # the "no" branch loops back to the step before the decision
    _arrow(draw, [(sx, dy - 26), (sx, ty), (cx + size_of[nodes[d - 1][0]][0] / 2 + 1, ty)])
    _node(draw, "process", sx, dy, sw, 52, no_step, fill_of["process"])
    for (shape, label), cy in zip(nodes, centres):
        _node(draw, shape, cx, cy, *size_of[shape], label, fill_of[shape])
    return img, (f"flowchart of {what}: {len(nodes)} steps top to bottom with a '{decision}' decision "
                 f"that loops back through '{no_step}'")


_TREES = (  # what, root, {branch: leaves}
    ("organisation chart", "Chief Executive", {
        "Operations": ["Logistics", "Facilities", "Purchasing"], "Finance": ["Accounting", "Payroll", "Audit"],
        "Engineering": ["Platform", "Mobile", "Quality"], "Sales": ["Accounts", "Partners", "Marketing"]}),
    ("animal taxonomy", "Animals", {
        "Mammals": ["Dog", "Whale", "Bat"], "Birds": ["Eagle", "Penguin", "Owl"], "Fish": ["Salmon", "Shark"],
        "Reptiles": ["Lizard", "Turtle", "Snake"]}),
    ("website site map", "Home", {
        "Products": ["Laptops", "Phones", "Accessories"], "Support": ["FAQ", "Contact", "Returns"],
        "About": ["Team", "Careers"], "Blog": ["News", "Guides", "Events"]}),
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
        _node(draw, "process", branch_x[branch], levels[1], min(150, slot * len(leaves) - 12), box_h, branch,
              fills[1 % len(fills)])
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

_APPS = (
    ("Inventory Manager", ("Dashboard", "Products", "Orders", "Suppliers", "Reports", "Settings"),
     ("Total items", "Low stock", "Open orders", "Suppliers"), "Search products", "Add product"),
    ("Mailbox", ("Inbox", "Starred", "Sent", "Drafts", "Archive", "Spam", "Trash"),
     ("Unread", "Today", "Flagged"), "Search mail", "Compose"),
    ("Project Tracker", ("Overview", "Tasks", "Calendar", "Team", "Files", "Settings"),
     ("Open tasks", "Due this week", "Completed", "Members"), "Filter tasks", "New task"),
    ("Shop Admin", ("Home", "Orders", "Customers", "Catalogue", "Discounts", "Analytics"),
     ("Revenue today", "Orders", "Visitors"), "Find an order", "Export"),
    ("Health Portal", ("Home", "Appointments", "Messages", "Test results", "Billing", "Profile"),
     ("Next visit", "Messages", "Prescriptions"), "Search doctors", "Book visit"),
)


def _ui_screenshot(rng: random.Random, index: int) -> tuple[Image.Image, str]:
    app, menu, cards, placeholder, action = _APPS[(index - 1) % len(_APPS)]
    w, h = rng.choice(((1024, 640), (1024, 640), (1080, 675), (960, 600)))
    accent = rng.choice(SATURATED[:5])
    img = Image.new("RGB", (w, h), (246, 247, 249))
    draw = ImageDraw.Draw(img)
    bar_h, side_w = 56, rng.randint(190, 220)
    draw.rectangle((0, 0, w, bar_h), fill=accent)
    _text(draw, (24, bar_h / 2), app, 20, WHITE, "lm", bold=True)
    draw.ellipse((w - 52, 12, w - 20, 44), fill=(255, 255, 255))
    _text(draw, (w - 36, 28), rng.choice(FIRST_NAMES)[0], 15, accent, "mm", bold=True)
    _text(draw, (w - 66, bar_h / 2), "Help", 14, WHITE, "rm")
    draw.rectangle((0, bar_h, side_w, h), fill=(236, 238, 242))
    selected = rng.randrange(len(menu))
    for i, item in enumerate(menu):
        y = bar_h + 20 + i * 44
        if i == selected:
            draw.rectangle((0, y, side_w, y + 38), fill=tuple(c // 4 + 191 for c in accent))
            draw.rectangle((0, y, 4, y + 38), fill=accent)
        _text(draw, (28, y + 19), item, 15, accent if i == selected else (60, 60, 70), "lm", bold=i == selected)
    x0, x1 = side_w + 32, w - 32
    _text(draw, (x0, bar_h + 22), menu[selected], 24, INK, bold=True)
    fy = bar_h + 72
    draw.rounded_rectangle((x0, fy, x1 - 290, fy + 40), 6, fill=WHITE, outline=(190, 194, 200), width=1)
    _text(draw, (x0 + 14, fy + 20), placeholder + "...", 15, (150, 150, 155), "lm")
    draw.rounded_rectangle((x1 - 270, fy, x1 - 140, fy + 40), 6, fill=accent)
    _text(draw, (x1 - 205, fy + 20), action, 15, WHITE, "mm", max_width=118, bold=True)
    draw.rounded_rectangle((x1 - 125, fy, x1, fy + 40), 6, fill=WHITE, outline=accent, width=2)
    _text(draw, (x1 - 62, fy + 20), "Cancel", 15, accent, "mm")
    cy, card_w = fy + 64, (x1 - x0 - 20 * (len(cards) - 1)) / len(cards)
    for i, label in enumerate(cards):
        cx = x0 + i * (card_w + 20)
        draw.rounded_rectangle((cx, cy, cx + card_w, cy + 104), 8, fill=WHITE, outline=(222, 224, 230))
        _text(draw, (cx + 16, cy + 18), label, 14, GREY_TEXT, max_width=card_w - 32)
        _text(draw, (cx + 16, cy + 46), f"{rng.randint(3, 980):,}", 30, INK, bold=True)
    ly = cy + 128
    rows = max(2, min(6, (h - ly - 24) // 44 - 1))
    draw.rounded_rectangle((x0, ly, x1, ly + 44 * (rows + 1)), 8, fill=WHITE, outline=(222, 224, 230))
    _text(draw, (x0 + 16, ly + 22), "Recent activity", 16, INK, "lm", bold=True)
    statuses = (("Done", (44, 160, 44)), ("Pending", (230, 140, 20)), ("Failed", (214, 39, 40)))
    for r in range(rows):
        y = ly + 44 * (r + 1)
        draw.line((x0 + 1, y, x1 - 1, y), fill=(235, 236, 240))
        _text(draw, (x0 + 16, y + 22), f"{_name(rng)} {rng.choice(_WORDS['verb'])} the {rng.choice(_WORDS['noun'])}",
              14, (60, 60, 70), "lm", max_width=x1 - x0 - 260)
        _text(draw, (x1 - 150, y + 22), f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d} PM", 13, GREY_TEXT, "lm")
        status, colour = rng.choice(statuses)
        draw.rounded_rectangle((x1 - 76, y + 11, x1 - 14, y + 33), 11, fill=tuple(c // 5 + 204 for c in colour))
        _text(draw, (x1 - 45, y + 22), status, 12, colour, "mm")
    return img, (f"UI screenshot of the '{app}' app: top bar, side menu ({len(menu)} items, '{menu[selected]}' "
                 f"selected), search field, buttons, {len(cards)} cards and an activity list")


# -------------------------------------------------------------------------------------------- receipt

def _mono(draw: ImageDraw.ImageDraw, x: float, y: float, text: str, pitch: float, size: int, fill, bold=False):
    """Draw text on a fixed character grid, so columns line up like a till printer's."""
    font = _font(size)
    for i, ch in enumerate(text):
        if ch != " ":
            for dx in (0, 1) if bold else (0,):
                draw.text((x + i * pitch + pitch / 2 + dx, y), ch, font=font, fill=fill, anchor="ma")


_STORES = (
    ("CORNER MARKET", ("Milk 1L", "Bread", "Eggs x12", "Butter", "Apples", "Bananas", "Cheddar", "Coffee",
                       "Rice 1kg", "Pasta", "Tomatoes", "Olive oil", "Yoghurt", "Orange juice", "Onions",
                       "Chicken", "Cereal", "Tea bags", "Soap", "Tissues", "Chocolate", "Carrots", "Honey")),
    ("GREEN LEAF CAFE", ("Latte", "Cappuccino", "Espresso", "Flat white", "Green tea", "Croissant", "Bagel",
                         "Muffin", "Avocado toast", "Soup of day", "Club sandwich", "Salad bowl", "Brownie",
                         "Lemonade", "Iced tea", "Cookie", "Scone", "Water", "Hot chocolate", "Pancakes")),
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
    pair(f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(2019, 2024)}",
         f"{rng.randint(7, 21):02d}:{rng.randint(0, 59):02d}")
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
    pair(rng.choice(("VISA", "MASTERCARD", "DEBIT")) + f" ****{rng.randint(1000, 9999)}",
         f"{(total_cents + tax) / 100:.2f}")
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
        draw.polygon([(48 + 36 * math.cos(a), 48 + 36 * math.sin(a)) for a in
                      (math.pi / 6 + k * math.pi / 3 for k in range(6))], fill=mark)
        draw.ellipse((34, 34, 62, 62), fill=extra)
    shapes = {"ring_triangle": "a ring around a triangle", "stacked_squares": "two overlapping rounded squares",
              "hexagon_dot": "a hexagon with a dot"}[design]
    return img, f"flat logo-like icon: {shapes} in 3 colours on a plain square, no text"


_RENDERERS: dict[str, Callable[[random.Random, int], tuple[Image.Image, str]]] = {
    "bar_chart": _bar_chart, "line_chart": _line_chart, "pie_chart": _pie_chart, "scatter_plot": _scatter_plot,
    "document": _document, "table": _table, "flowchart": _flowchart, "tree_diagram": _tree_diagram,
    "network_diagram": _network_diagram, "ui_screenshot": _ui_screenshot, "receipt": _receipt, "icon": _icon,
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
