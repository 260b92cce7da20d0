"""The `curate` command as a user meets it: clear one-line errors, fast subcommands that leave HOME alone."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.recipes import load_recipe
from tests.factories import make_image, without
from tests.helpers import curate_in_process, resolve, run_curate

PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('PREFECT_IMPORTED=' + str('prefect' in sys.modules), file=sys.stderr))\n"
    "sys.argv = ['curate', *sys.argv[1:]]\n"
    "from benchcurate.flows.cli import main\nmain()\n"
)


def probe(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter that reports whether Prefect got imported."""
    env = {
        **os.environ,
        "HOME": str(home),
        "PREFECT_HOME": str(home / ".prefect"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "MPLCONFIGDIR": str(home / ".mpl"),
        "HF_HOME": str(home / ".hf"),
    }
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "multiverse", "--input", "/no/such/folder"], "input /no/such/folder does not exist"),
        (
            ["run", "multiversal"],
            "unknown recipe 'multiversal'; available: alignmmbench, convbench, multiverse, probench",
        ),
        (
            ["run", "multiverse", "--set", "image_quality.min_quality_score=banana"],
            "bad parameter for stage image_quality",
        ),
        (["run", "multiverse", "--set", "min_quality_score=4"], "--set expects stage.field=value"),
        (["run", "multiverse", "--set", "image_qualty.min_quality_score=4"], "no stage ['image_qualty']"),
        (["run", "multiverse", "--base-url", "http://127.0.0.1:9/v1"], "add --backend openai"),
        (["run", "multiverse", "--backend", "gpt"], "--backend: input should be 'offline' or 'openai'"),
        (["run", "multiverse", "--run-id", "a/b"], "bad run id 'a/b'"),
        (
            ["eval", "run", "r", "--model", "m", "--judge-model", "j", "--history", "all"],
            "--history: input should be 'oracle' or 'self'",
        ),
        (
            ["eval", "run", "r", "--model", "m", "--judge-model", "j", "--baseline-base-url", "http://127.0.0.1:9/v1"],
            "--baseline-model: field required",
        ),
        (["report", "no-such-run"], "no run 'no-such-run'"),
        (
            ["images", "dups", "hashes.jsonl", "--out", "groups.jsonl", "--keep-rule", "newest"],
            "--keep-rule: input should be 'least_processed' or 'largest'",
        ),
        (["run", "multiverse", "--set", "persona_generate.prompt_version=2"], "no prompt 'persona' version 2"),
        (["run", "multiverse", "--backend", "openai"], "needs a model name: pass --model NAME"),
    ],
)
def test_user_mistakes_get_one_line_errors_without_traceback(tmp_path, args, message):
    home = tmp_path / "home"
    home.mkdir()
    result = curate_in_process(args, tmp_path, {"HOME": str(home)})
    assert result.returncode == 2, result.stdout + result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and message in error_lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not list(home.iterdir()) and not (tmp_path / "outputs").exists()


def test_a_user_mistake_is_found_before_prefect_is_imported(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = probe(["run", "multiverse", "--set", "image_quality.min_quality_score=banana"], tmp_path, home)
    assert result.returncode == 2 and "bad parameter for stage image_quality" in result.stderr
    assert "PREFECT_IMPORTED=False" in result.stderr and not list(home.iterdir())


def test_help_explains_the_commands(tmp_path):
    result = run_curate(["--help"], tmp_path)
    assert result.returncode == 0
    for command in ("run", "report", "release", "recipes", "serve"):
        assert command in result.stdout
    run_help = run_curate(["run", "--help"], tmp_path, {"COLUMNS": "250"}).stdout  # no wrapping mid-phrase
    assert "--input" in run_help and "bundled demo" in run_help and "resume" in run_help


def test_recipes_lists_and_shows_without_prefect_or_home_writes(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    listed = probe(["recipes"], tmp_path, home)
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert (
        listed.returncode == 0 and names == sorted(names) and {"alignmmbench", "convbench", "multiverse"} <= set(names)
    )
    shown = probe(["recipes", "multiverse"], tmp_path, home)
    assert "min_quality_score: 5" in shown.stdout and "max_hamming_distance: 8" in shown.stdout
    assert "PREFECT_IMPORTED=False" in listed.stderr + shown.stderr
    assert not list(home.iterdir()) and not (tmp_path / "outputs").exists()


def test_report_prints_the_funnel_of_a_run_without_prefect(tmp_path):
    for seed in range(4):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    (tmp_path / "images" / "bad.png").write_text("x")
    config = resolve(
        "multiverse",
        tmp_path / "outputs",
        input_path=str(tmp_path / "images"),
        run_id="r1",
        overrides={"category_min_size": {"min_items_per_category": 1}},
    )
    store = RunStore(tmp_path / "outputs" / "runs" / "r1")
    store.save_config(config)
    run_all(store.root)
    home = tmp_path / "home"
    home.mkdir()
    result = probe(["report", "r1"], tmp_path, home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    stages = len(load_recipe("multiverse").stages)
    assert "backend: offline-heuristic" in lines[0] and f"{stages}/{stages} stages done" in lines[0]
    hashing = next(line for line in lines if "image_phash" in line)
    assert hashing.split()[2:4] == ["5", "1"] and "image_unreadable 1" in hashing
    assert "PREFECT_IMPORTED=False" in result.stderr and not list(home.iterdir())
    by_folder = probe(["report", str(store.root), "--json"], tmp_path, home)
    assert '"stage": "image_ingest"' in by_folder.stdout


def test_a_resumed_runs_changed_options_are_named_as_the_flags_the_user_types():
    """The resume line names each changed option by its flag (`--name`, `--allow-root`), not by its field."""
    from benchcurate.curation.recipes import option_changes
    from benchcurate.flows.options import RUN_FLAGS
    from benchcurate.schemas import RunOptions

    before = RunOptions(release_name="first", allowed_roots=["/data/a"], seed=1)
    after = RunOptions(release_name="second", allowed_roots=["/data/b"], seed=1)
    changes = option_changes(before, after, {flag.path: flag.spelling for flag in RUN_FLAGS})
    assert sorted(changes) == ["--allow-root: ['/data/a'] -> ['/data/b']", "--name: first -> second"]


def test_a_kept_prefect_database_that_cannot_be_used_is_skipped_not_fatal(tmp_path, monkeypatch):
    """A new server's database is seeded only from a usable kept copy: a folder in its place, or a copy that cannot
    be written (its folder gone, as on a full or broken disk), leaves the server to migrate as Prefect's own do."""
    import sqlite3

    from benchcurate.flows import prefect_server

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    template = prefect_server.database_template()
    template.mkdir(parents=True)  # not a database
    database = tmp_path / "outputs" / "prefect" / "prefect.db"
    database.parent.mkdir(parents=True)
    assert prefect_server.seed_database(database) is False and not database.exists()
    template.rmdir()
    with sqlite3.connect(template) as kept:
        kept.execute("CREATE TABLE alembic_version (version_num TEXT)")
        kept.execute("INSERT INTO alembic_version VALUES ('head')")
    assert prefect_server.seed_database(tmp_path / "gone" / "prefect.db") is False  # cannot be written there
    assert prefect_server.seed_database(database) is True and database.stat().st_mode & 0o777 == 0o600


def test_a_prefect_url_with_no_server_behind_it_is_a_one_line_error(tmp_path):
    from tests.servers import free_port

    result = run_curate(["run", "multiverse"], tmp_path, {"PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        "no Prefect server answers at http://127.0.0.1:" in result.stderr and "PREFECT_API_URL setting" in result.stderr
    )


def test_images_hash_and_dups_without_prefect_or_home_writes(tmp_path):
    from PIL import Image

    folder = tmp_path / "pics"
    for seed in range(4):
        make_image(folder / f"{seed}.png", seed, (320, 240))
    with Image.open(folder / "0.png") as original:
        original.resize((160, 120)).save(folder / "0-small.jpg", quality=85)
    (folder / "broken.jpg").write_text("no")
    reference_folder = tmp_path / "old"
    make_image(reference_folder / "3-old.png", 3, (320, 240))
    home = tmp_path / "home"
    home.mkdir()
    hashed = probe(["images", "hash", str(folder), "--out", str(tmp_path / "h.jsonl"), "--jobs", "2"], tmp_path, home)
    assert hashed.returncode == 0, hashed.stderr
    rows = {Path(row["path"]).name: row for row in map(json.loads, (tmp_path / "h.jsonl").read_text().splitlines())}
    assert sorted(rows) == ["0-small.jpg", "0.png", "1.png", "2.png", "3.png", "broken.jpg"]
    assert rows["broken.jpg"]["phash"] is None and rows["broken.jpg"]["error"].startswith("image_unreadable")
    assert len(rows["0.png"]["phash"]) == 16 and (rows["0.png"]["width"], rows["0.png"]["height"]) == (320, 240)
    assert rows["0.png"]["sha256"] == hashlib.sha256((folder / "0.png").read_bytes()).hexdigest()
    probe(["images", "hash", str(reference_folder), "--out", str(tmp_path / "ref.jsonl")], tmp_path, home)
    grouped = probe(
        [
            "images",
            "dups",
            str(tmp_path / "h.jsonl"),
            "--threshold",
            "8",
            "--out",
            str(tmp_path / "g.jsonl"),
            "--reference",
            str(tmp_path / "ref.jsonl"),
        ],
        tmp_path,
        home,
    )
    assert grouped.returncode == 0, grouped.stderr
    assert "was made without --likeness" in grouped.stderr  # why dups decoded again, and how not to
    groups = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert {
        "reference": str(reference_folder / "3-old.png"),
        "dropped": [{"path": str(folder / "3.png"), "distance": 0}],
    } in groups
    kept = next(group for group in groups if group.get("kept") == str(folder / "0.png"))
    assert [entry["path"] for entry in kept["dropped"]] == [str(folder / "0-small.jpg")]
    assert "PREFECT_IMPORTED=False" in hashed.stderr + grouped.stderr and not list(home.iterdir())
    bad = probe(["images", "dups", str(tmp_path / "h.jsonl"), "--threshold", "99", "--out", "x"], tmp_path, home)
    assert bad.returncode == 2 and "--threshold must be between 0 and 32" in bad.stderr


def test_images_hash_with_likeness_keeps_what_dups_verifies_so_dups_decodes_no_file_again(tmp_path):
    """`images hash --likeness` writes OUT.pictures (the verification's copy of each file, from the hashes' own
    decode): `images dups` then groups as before with the image files gone, and a plain hash removes a stale one."""
    from PIL import Image

    from benchcurate.curation.images import verify
    from benchcurate.curation.images.hashfile import pictures_file, read_hashes, stored_pictures

    folder = tmp_path / "pics"
    for seed in range(3):
        make_image(folder / f"{seed}.png", seed, (320, 240))
    with Image.open(folder / "0.png") as original:
        original.resize((160, 120)).save(folder / "0-small.jpg", quality=85)
        original.transpose(Image.Transpose.ROTATE_90).save(folder / "0-turned.png")
    home = tmp_path / "home"
    home.mkdir()
    hashes = tmp_path / "h.jsonl"
    hashed = probe(["images", "hash", str(folder), "--out", str(hashes), "--likeness", "--jobs", "2"], tmp_path, home)
    assert hashed.returncode == 0, hashed.stderr
    table = read_hashes(hashes)
    stored = stored_pictures(table, hashes)
    for index, path in enumerate(table.paths):
        kept, made = verify.unpack(stored(index)), verify.picture(Path(path), 10**9)
        assert np.array_equal(kept.fine, made.fine) and kept[1:] == made[1:], path
    first = probe(["images", "dups", str(hashes), "--out", str(tmp_path / "g1.jsonl")], tmp_path, home)
    assert first.returncode == 0, first.stderr
    groups = [json.loads(line) for line in (tmp_path / "g1.jsonl").read_text().splitlines()]
    assert [(Path(g["kept"]).name, sorted(Path(d["path"]).name for d in g["dropped"])) for g in groups] == [
        ("0.png", ["0-small.jpg", "0-turned.png"])
    ]
    assert "note:" not in first.stderr
    moved = tmp_path / "moved.jsonl"  # the hashes file without its side file: the same groups, decoded again
    moved.write_bytes(hashes.read_bytes())
    again = probe(["images", "dups", str(moved), "--out", str(tmp_path / "g0.jsonl")], tmp_path, home)
    assert again.returncode == 0 and f"note: {moved}.pictures is missing" in again.stderr, again.stderr
    assert (tmp_path / "g0.jsonl").read_text() == (tmp_path / "g1.jsonl").read_text()
    newer, side, rows = tmp_path / "newer.jsonl", bytearray(), []  # pictures in a layout a later version wrote
    for index, row in enumerate(table.rows):
        blob = without(stored(index), version=verify.PICTURE_VERSION + 1)
        rows.append(json.dumps({**row, "picture": [len(side), len(blob)]}))
        side += blob
    newer.write_text("".join(row + "\n" for row in rows))
    pictures_file(newer).write_bytes(bytes(side))
    later = probe(["images", "dups", str(newer), "--out", str(tmp_path / "g3.jsonl")], tmp_path, home)
    assert later.returncode == 0 and "written by a newer version of curate" in later.stderr, later.stderr
    assert (tmp_path / "g3.jsonl").read_text() == (tmp_path / "g1.jsonl").read_text()  # made again from the files
    for path in folder.iterdir():  # nothing left to decode: the verification reads the side file only
        path.write_bytes(b"")
    second = probe(["images", "dups", str(hashes), "--out", str(tmp_path / "g2.jsonl")], tmp_path, home)
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "g2.jsonl").read_text() == (tmp_path / "g1.jsonl").read_text()
    make_image(folder / "0.png", 0, (320, 240))
    plain = probe(["images", "hash", str(folder / "0.png"), "--out", str(hashes)], tmp_path, home)
    assert plain.returncode == 0 and not pictures_file(hashes).exists()


def test_images_dups_without_verification_orders_copies_from_the_side_file(tmp_path):
    """Without --verify, the centre kept is still chosen by what the copies lost (colour before pixels). What that
    reads comes from the side file `images hash --likeness` wrote: the colour original is kept over a larger
    greyscale copy with the image files gone, and no file is decoded (it had decoded each one again)."""
    from PIL import Image

    folder = tmp_path / "pics"
    make_image(folder / "colour.png", 0, (320, 240))
    with Image.open(folder / "colour.png") as original:
        original.convert("L").resize((400, 300)).convert("RGB").save(folder / "grey-larger.png")
    home = tmp_path / "home"
    home.mkdir()
    hashes = tmp_path / "h.jsonl"
    hashed = probe(["images", "hash", str(folder), "--out", str(hashes), "--likeness"], tmp_path, home)
    assert hashed.returncode == 0, hashed.stderr
    for path in folder.iterdir():
        path.write_bytes(b"")
    grouped = probe(["images", "dups", str(hashes), "--out", str(tmp_path / "g.jsonl"), "--no-verify"], tmp_path, home)
    assert grouped.returncode == 0 and "note:" not in grouped.stderr, grouped.stderr
    groups = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert [(Path(g["kept"]).name, [Path(d["path"]).name for d in g["dropped"]]) for g in groups] == [
        ("colour.png", ["grey-larger.png"])
    ]


def test_images_dups_reads_files_hashed_by_relative_path_from_another_folder_or_says_where_to_run(tmp_path):
    """A hashes file names files as `images hash` was given them. `images dups` run from another folder finds
    them beside the hashes file and groups as from the folder they were hashed in; a file gone is an error that
    says what to do, not a group quietly lost (the verification cannot read it)."""
    from PIL import Image

    folder = tmp_path / "pics"
    for seed in range(3):
        make_image(folder / f"{seed}.png", seed, (320, 240))
    with Image.open(folder / "0.png") as original:
        original.resize((160, 120)).save(folder / "0-small.jpg", quality=85)
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    hashes = tmp_path / "h.jsonl"
    assert probe(["images", "hash", "pics", "--out", "h.jsonl"], tmp_path, home).returncode == 0
    assert {json.loads(line)["path"] for line in hashes.read_text().splitlines()} == {
        "pics/0.png",
        "pics/1.png",
        "pics/2.png",
        "pics/0-small.jpg",
    }
    here = probe(["images", "dups", "h.jsonl", "--out", "g1.jsonl"], tmp_path, home)
    there = probe(["images", "dups", str(hashes), "--out", str(tmp_path / "g2.jsonl")], elsewhere, home)
    assert here.returncode == 0 and there.returncode == 0, here.stderr + there.stderr
    groups = [json.loads(line) for line in (tmp_path / "g1.jsonl").read_text().splitlines()]
    assert [(g["kept"], [d["path"] for d in g["dropped"]]) for g in groups] == [("pics/0.png", ["pics/0-small.jpg"])]
    assert (tmp_path / "g2.jsonl").read_text() == (tmp_path / "g1.jsonl").read_text()
    (folder / "1.png").unlink()
    gone = probe(["images", "dups", str(hashes), "--out", str(tmp_path / "g3.jsonl")], elsewhere, home)
    assert gone.returncode == 2 and "Traceback" not in gone.stderr and not (tmp_path / "g3.jsonl").exists()
    assert "1 of the 4 files" in gone.stderr and "pics/1.png" in gone.stderr and "--no-verify" in gone.stderr
    unverified = probe(
        ["images", "dups", str(hashes), "--out", str(tmp_path / "g4.jsonl"), "--no-verify"], elsewhere, home
    )
    assert unverified.returncode == 0, unverified.stderr


INTERRUPTED_WITH_BUSY_POOL = """
import atexit, sys, time
from benchcurate.curation.core import parallel
from benchcurate.flows import cli

if __name__ == "__main__":  # spawned workers import this file again
    cli.EXIT_HANDLER_SECONDS = float(sys.argv[2])
    pool = parallel._process_pool(2)
    for _ in range(2):
        pool.submit(time.sleep, 600)  # each worker busy, as on a lock it held when the signal came
    while len(pool._processes) < 2 or any(p.pid is None for p in pool._processes.values()):
        time.sleep(0.05)
    time.sleep(2)  # both have taken their chunk
    assert all(process.is_alive() for process in pool._processes.values())
    print(" ".join(str(p.pid) for p in pool._processes.values()), flush=True)
    if sys.argv[1] == "stuck-handler":
        atexit.register(time.sleep, 600)  # an exit handler that never returns (a server that does not answer)
    cli._interrupted("nothing finished is lost: run it again")
"""


@pytest.mark.parametrize("case", ["busy-workers", "stuck-handler"])
def test_ctrl_c_outside_a_map_ends_the_command_and_its_workers_within_the_limit(case, tmp_path):
    """A Ctrl-C that lands outside a parallel map (between chunks, in another thread) still finds the pool up:
    the command must not wait for busy workers (multiprocessing's exit handler joins them without a limit) nor
    for an exit handler that never returns. Both hung the command before."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_WITH_BUSY_POOL)
    started = subprocess.Popen(
        [sys.executable, str(script), case, "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        stdout, stderr = started.communicate(timeout=40)
    finally:
        started.kill()
    assert started.returncode == 130, stderr[-2000:]
    assert "interrupted; nothing finished is lost: run it again" in stderr
    workers = [int(pid) for pid in stdout.split()]
    assert len(workers) == 2
    for pid in workers:  # killed, not left to sleep out their ten minutes
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
