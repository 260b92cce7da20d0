"""The HTML run report on a large run: how long `curate report RUN --html` takes, how big its pages are, and how
fast its index opens in headless Chromium, against the naive way (one page holding every item) in the same run.

Run: `curate run multiverse --no-release` over load_test.py's generated corpus (n JPEGs of 256x192 with planted
copies and truncated files; default 5,000, quick 200), which writes the report as every run does. Then, as whole
commands: the report written again from scratch (no thumbnails yet) and again with its thumbnails made. The naive
page is every page's items in one HTML file. Load time: Chromium's `load` event for each page, opened from the
file system (lazy images not counted: they load as the reader scrolls).

    cd /work/main && .venv/bin/python bench/html_report.py [--quick] [--images N]
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
import load_test

from tests.helpers import CURATE, REPO

QUICK_IMAGES = 200
PLAYWRIGHT = REPO / ".ls" / "pw" / "node_modules" / "playwright-core"
LOAD_SCRIPT = """
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  const page = await browser.newPage();
  const result = {};
  for (const file of process.argv.slice(2)) {
    const runs = [];
    for (let k = 0; k < 3; k++) {
      const started = Date.now();
      await page.goto('file://' + file, { waitUntil: 'load', timeout: 120000 });
      runs.push(Date.now() - started);
    }
    result[file] = runs.sort((a, b) => a - b)[1];
  }
  await browser.close();
  console.log(JSON.stringify(result));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def naive_page(folder: Path) -> Path:
    """Every page's items in one HTML file: the way a report without pages would hold them."""
    pages = (
        sorted(folder.glob("drops-*.html"))
        + sorted(folder.glob("groups-*.html"))
        + sorted(folder.glob("samples-*.html"))
    )
    bodies = [
        re.search(r"<main id=\"main\">(.*)</main>", page.read_text(encoding="utf-8"), re.S).group(1) for page in pages
    ]
    index = (folder / "index.html").read_text(encoding="utf-8")
    head, tail = index.split('<main id="main">', 1)
    path = folder / "one-page.html"
    path.write_text(head + '<main id="main">' + "".join(bodies) + tail.split("</main>", 1)[1], encoding="utf-8")
    return path


def load_times(files: list[Path], work: Path) -> dict[str, int] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not PLAYWRIGHT.exists():
        print("no Chromium or playwright-core (make test installs them): load times not measured")
        return None
    script = work / "load.js"
    script.write_text(LOAD_SCRIPT)
    env = {"HOME": str(work), "PATH": "/usr/bin:/bin", "CHROMIUM_PATH": chromium, "PLAYWRIGHT_CORE": str(PLAYWRIGHT)}
    result = subprocess.run(
        ["node", str(script), *map(str, files)], capture_output=True, text=True, env=env, timeout=600, check=True
    )
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return {Path(name).name: value for name, value in found.items()}


def main() -> None:
    parser = common.arguments(__doc__, f"{QUICK_IMAGES} images")
    parser.add_argument("--images", type=int, default=5_000)
    args = parser.parse_args()
    count = QUICK_IMAGES if args.quick else args.images
    work = common.scratch("html-report-")
    corpus = work / "corpus"
    load_test.make_corpus(corpus, count)
    out = work / "outputs"
    env = common.curate_env()
    with common.prefect_api(work) as api:
        env = common.curate_env(api)
        run = common.run_command(
            [
                str(CURATE),
                "run",
                "multiverse",
                "--input",
                str(corpus / "images"),
                "--run-id",
                "big",
                "--out",
                str(out),
                "--no-release",
                "--progress",
                "none",
                *load_test.QUALITY,
            ],
            env,
        )
    run_dir = out / "runs" / "big"
    folder = run_dir / "report" / "html"
    shutil.rmtree(folder)
    first = common.run_command([str(CURATE), "report", str(run_dir), "--html"], env)
    again = common.run_command([str(CURATE), "report", str(run_dir), "--html"], env)
    pages = sorted(folder.glob("*.html"))
    thumbs = list((folder / "thumbs").glob("*.jpg"))
    sizes = {page.name: page.stat().st_size for page in pages}
    one = naive_page(folder)
    loads = load_times([folder / "index.html", folder / "samples-1.html", one], work)
    data = {
        "images": count,
        "run_seconds": run.seconds,
        "report_first_seconds": first.seconds,
        "report_again_seconds": again.seconds,
        "pages": len(pages),
        "html_bytes": sum(sizes.values()),
        "largest_page": max(sizes.items(), key=lambda item: item[1]),
        "index_bytes": sizes["index.html"],
        "thumbnails": len(thumbs),
        "thumbnail_bytes": sum(path.stat().st_size for path in thumbs),
        "one_page_bytes": one.stat().st_size,
        "load_ms": loads,
        "machine": common.machine(),
    }
    rows = [
        ["paged report (ours): index.html", f"{sizes['index.html'] / 1024:.0f} KB", loads and loads["index.html"]],
        [
            "paged report (ours): samples-1.html",
            f"{sizes['samples-1.html'] / 1024:.0f} KB",
            loads and loads["samples-1.html"],
        ],
        ["naive: one page with every item", f"{one.stat().st_size / 2**20:.1f} MB", loads and loads[one.name]],
    ]
    text, markdown = common.table(["page", "size", "load ms (median of 3)"], rows)
    summary = (
        f"{count:,} images: the run took {run.seconds:.1f} s with its report; `curate report --html` "
        f"{first.seconds:.1f} s from scratch ({len(thumbs):,} thumbnails, "
        f"{data['thumbnail_bytes'] / 2**20:.1f} MB) and {again.seconds:.1f} s with them; {len(pages)} pages, "
        f"{data['html_bytes'] / 2**20:.1f} MB of HTML, the largest {data['largest_page'][1] / 1024:.0f} KB "
        f"({data['largest_page'][0]})."
    )
    if loads:
        summary += (
            f" Opening the index took {loads['index.html']} ms, the naive single page "
            f"{loads[one.name]} ms ({loads[one.name] / max(1, loads['index.html']):.1f}x)."
        )
    print(text + "\n" + summary)
    common.publish(
        "html_report",
        data,
        f"# The HTML report on a large run\n\n{common.machine_line(data['machine'])}\n\n{markdown}\n\n{summary}\n",
        args.quick,
    )


if __name__ == "__main__":
    main()
