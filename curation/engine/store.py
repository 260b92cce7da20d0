"""The run store: one run's folder on disk, and the one place that reads and writes its files.

Layout of `outputs/runs/<run-id>/`:

    run.json                          the resolved RunConfig (no secrets)
    state.json                        the current chain: per stage its key, output folder, output digest, status
    stages/NN_<stage>/work-<key>/     item and transform stages: stored scores or generated items
    stages/NN_<stage>/<key>/          kept.jsonl, dropped.jsonl, decisions.jsonl, stats.json, DONE

Every file is written under a temporary name and renamed into place, so a kill leaves the old file or the new one,
never half of one. Samples are read back lazily, one line at a time (`read_samples`) or in chunks (`chunked`), so no
stage output is ever held whole in memory by the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import JsonValue

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.files import PARTIAL_SUFFIX, replacing
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.core.jsonl import read_samples
from benchcurate.schemas import RunConfig, Sample
from benchcurate.schemas.store import RunState, StageState

CACHE_FILE = Path("cache") / "cache.sqlite"  # under the output folder, shared by all its runs


def chunked(items: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def rows(path: Path) -> Iterator[str]:
    """The non-empty lines of a JSONL file, without their newline (what worker processes get, unparsed)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield line.rstrip("\n")


def write_json_atomic(path: Path, value: JsonValue) -> None:
    with replacing(path) as partial:
        partial.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


DONE = "DONE"


def seal(folder: Path) -> None:
    """Mark a finished output folder: DONE lists the sha256 of every file in it, written last and whole (a kill
    while writing it leaves no DONE, so the stage is redone rather than read from a torn list)."""
    digests = {
        path.name: sha256_file(path)
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != DONE and not path.name.endswith(PARTIAL_SUFFIX)
    }
    with replacing(folder / DONE) as partial:
        partial.write_text(json.dumps(digests, indent=1) + "\n", encoding="utf-8")


def sealed(folder: Path) -> bool:
    return (folder / DONE).exists()


def changed_since_sealed(folder: Path) -> list[str]:
    """Files of a sealed folder that are missing or differ from when it was sealed (empty: intact). A DONE with no
    digests (written before outputs were sealed) vouches for nothing more than completion."""
    text = (folder / DONE).read_text(encoding="utf-8").strip()
    digests = json.loads(text) if text else {}
    return [
        name
        for name, digest in digests.items()
        if not (folder / name).is_file() or sha256_file(folder / name) != digest
    ]


def _outcome_settings(config: RunConfig) -> dict:
    """What a run's results depend on: everything but where the work runs."""
    return config.recipe.model_dump(exclude={"execution"})


@contextlib.contextmanager
def held(path: Path, busy: Callable[[str], str]) -> Iterator[None]:
    """Hold `path` for this process (its parent folder is made): another process holding it is a UserError
    `busy(holder)`. The lock is the kernel's (flock), so a killed holder never leaves it taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise UserError(busy(handle.read().strip() or "another process")) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        yield


class RunStore:
    """Paths, run.json and state.json of one run folder, and the stages' kept items."""

    def __init__(self, run_dir: Path):
        self.root = run_dir

    @property
    def config_path(self) -> Path:
        return self.root / "run.json"

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def cache_path(self) -> Path:
        """The cache shared by every run under the same output folder: `<out>/cache/cache.sqlite`."""
        return self.root.parent.parent / CACHE_FILE

    def exists(self) -> bool:
        return self.config_path.exists()

    def make(self) -> None:
        """The run folder, and the runs/ folder above it, private (0700): model replies, reviews and errors are
        the user's only, whatever the umask of the process writing them."""
        for folder in (self.root.parent, self.root):
            folder.mkdir(exist_ok=True, parents=True)
            folder.chmod(0o700)

    def load_config(self) -> RunConfig:
        if not self.config_path.exists():
            raise UserError(
                f"{self.root} is not a run folder (no run.json); pass a run id under outputs/runs or a run folder"
            )
        return RunConfig.model_validate_json(self.config_path.read_text(encoding="utf-8"))

    def save_config(self, config: RunConfig) -> None:
        """Write run.json; a changed configuration clears the chain, which the next stages rebuild (or skip)."""
        self.make()
        if self.config_path.exists() and _outcome_settings(self.load_config()) != _outcome_settings(config):
            self.state_path.unlink(missing_ok=True)
        write_json_atomic(self.config_path, config.model_dump(mode="json"))

    def chain(self) -> list[StageState]:
        """state.json's stages in order: done ones, possibly ending with one that waits."""
        if not self.state_path.exists():
            return []
        return RunState.model_validate_json(self.state_path.read_text(encoding="utf-8")).stages

    def record_stage(self, entry: StageState) -> None:
        """Set the entry's stage as the chain's latest; later entries are dropped until they re-validate."""
        stages = self.chain()[: entry.index]
        if len(stages) != entry.index:
            raise RuntimeError(f"state.json has no entry for stage {entry.index - 1}; run the stages in order")
        write_json_atomic(self.state_path, RunState(stages=[*stages, entry]).model_dump(mode="json", exclude_none=True))

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the run for one process: a second `curate run` (or deployment run) of the same run id fails at
        once with one line instead of reading the first one's half-written files."""
        self.make()
        return held(
            self.root / "lock",
            lambda holder: (
                f"run {self.root.name} is being run by {holder}; wait for it to end, or use another --run-id"
            ),
        )

    def stage_folder(self, index: int, name: str) -> Path:
        return self.root / "stages" / f"{index + 1:02d}_{name}"

    def done_output(self, index: int) -> StageState | None:
        """Stage `index`'s chain entry if that stage is done, else None (not reached, or waiting for batches)."""
        chain = self.chain()
        entry = chain[index] if 0 <= index < len(chain) else None
        return entry if entry is not None and entry.status == "done" else None

    def kept_path(self, index: int) -> Path:
        """The kept.jsonl of a done stage, checked against the digest recorded when it was written; an error
        naming the stage when it is not done or was changed since."""
        entry = self.done_output(index)
        if entry is None or entry.output_dir is None:
            raise RuntimeError(f"stage {index + 1} of run {self.root.name} is not complete")
        path = Path(entry.output_dir) / "kept.jsonl"
        if entry.output_sha256 and (not path.is_file() or sha256_file(path) != entry.output_sha256):
            raise UserError(
                f"stage {entry.stage}'s stored output ({path}) changed since it was written; rerun "
                f"`curate run {self.load_config().recipe.name} --run-id {self.root.name}` to redo it"
            )
        return path

    def last_kept_path(self) -> Path | None:
        """The kept.jsonl of the last done stage of the chain, or None when no stage is done."""
        done = [entry for entry in self.chain() if entry.status == "done" and entry.output_dir]
        return Path(done[-1].output_dir) / "kept.jsonl" if done else None

    def kept(self, index: int) -> Iterator[Sample]:
        """The samples stage `index` kept, read lazily."""
        return read_samples(self.kept_path(index))
