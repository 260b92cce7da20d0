"""Every command the README and the guides in docs/ show, run as written, in order, in a sandbox of its own.

A guide's ```bash blocks are commands (a trailing backslash continues a line, `#` starts a comment, a trailing `&`
runs in the background until the guide ends, `(exit N)` in a line's comment is the exit code it is meant to end
with); its ```python blocks run with the venv's Python. Each command runs in bash in the sandbox's working folder,
and what it exports or changes (`export`, `eval`, `cd`) carries over to the next, as in a terminal. What a guide
cannot show as a command (a person annotating in the browser) is an HTML comment `<!-- doc-test: NAME ARGS -->`,
invisible on the page, that calls the step NAME of `STEPS` here. The servers a reader would point the commands at
stand on loopback: an OpenAI-protocol server (OPENAI_BASE_URL), the Hub stand-in (HF_ENDPOINT) and a Prefect
server; Label Studio is the real one `curate ls up` starts. Placeholders a reader replaces (`ORG/NAME`, `hf_...`,
a model server at 127.0.0.1:8000) are replaced by the sandbox's own values before a command runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\s*$")
DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(.+?)\s*-->")
EXPECTED_EXIT = re.compile(r"\(exit (\d+)\)")
# commands CI itself runs (`.ci/run` is `make test`, which builds Label Studio's venv): shown, not run again here
RUN_BY_CI = {"make test": "CI runs it: .ci/run", "make ls": "make test builds it", "make test-quick": "CI's quick loop",
             "make bench-quick": "CI runs it after make test"}
# what a command runs in place of one that would install the project again into the sandbox
INSTEAD = {"make demo": "curate run multiverse"}


@dataclass
class Step:
    doc: Path
    line: int
    kind: str  # "bash", "python" or "directive"
    text: str
    expect_exit: int = 0
    background: bool = False


def steps(doc: Path) -> list[Step]:
    """The runnable steps of a Markdown file, in order."""
    found, block, kind, start = [], None, "", 0
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if fence and block is None:
            block, kind, start = [], fence.group(1), number
            continue
        if fence and block is not None:
            if kind == "bash":
                found += _bash_steps(doc, start, block)
            elif kind == "python":
                found.append(Step(doc, start, "python", "\n".join(block)))
            block = None
            continue
        if block is not None:
            block.append(line)
        elif (directive := DIRECTIVE.search(line)) is not None:
            found.append(Step(doc, number, "directive", directive.group(1)))
    return found


def _bash_steps(doc: Path, start: int, lines: list[str]) -> list[Step]:
    result, pending, first = [], "", 0
    for offset, line in enumerate(lines, 1):
        if not pending:
            first = start + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        command, comment = _split_comment(whole)
        if not command:
            continue
        expected = EXPECTED_EXIT.search(comment)
        background = command.endswith("&") and not command.endswith("&&")
        result.append(Step(doc, first, "bash", command.rstrip("&").strip() if background else command,
                           int(expected.group(1)) if expected else 0, background))
    return result


def _split_comment(line: str) -> tuple[str, str]:
    """(the command, its trailing comment): a `#` outside quotes that starts a word begins the comment."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip(), line[index + 1:]
    return line.strip(), ""


@dataclass
class Sandbox:
    """Where a guide runs: its working folder, HOME, environment, the replacements for placeholders, what was
    started in the background, and every command's output (for the failure message)."""

    root: Path
    env: dict[str, str]
    replacements: dict[str, str] = field(default_factory=dict)
    background: list[subprocess.Popen] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    context: dict = field(default_factory=dict)  # what steps hand each other (servers, tokens)

    @property
    def cwd(self) -> Path:
        return Path(self.env.get("PWD") or self.root / "work")

    def replace(self, text: str) -> str:
        for placeholder, value in self.replacements.items():
            text = text.replace(placeholder, value)
        return text


def run_doc(doc: Path, sandbox: Sandbox, steps_by_name: dict[str, Callable[[Sandbox, list[str]], None]]) -> int:
    """Run every step of `doc` in `sandbox`; returns the number of commands run. A command that ends otherwise
    than the guide says fails with the guide's file and line, and the command's output."""
    ran = 0
    try:
        for step in steps(doc):
            where = f"{doc.relative_to(REPO) if doc.is_relative_to(REPO) else doc.name}:{step.line}"
            if step.kind == "directive":
                name, *args = shlex.split(step.text)
                assert name in steps_by_name, f"{where}: unknown doc-test step {name!r}"
                steps_by_name[name](sandbox, args)
                continue
            if step.kind == "bash" and step.text in RUN_BY_CI:
                continue
            text = sandbox.replace(INSTEAD.get(step.text, step.text))
            if step.kind == "python":
                code = _run(sandbox, [sys.executable, "-c", text], step, where)
            elif step.background:
                sandbox.background.append(subprocess.Popen(["bash", "-c", text], cwd=sandbox.cwd, env=sandbox.env,
                                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                           start_new_session=True))
                time.sleep(1)
                ran += 1
                continue
            else:
                code = _run_bash(sandbox, text, step, where)
            assert code == step.expect_exit, f"{where}: `{text}` ended with {code}, the guide says " \
                                             f"{step.expect_exit}\n" + "\n".join(sandbox.log[-2:])[-6000:]
            ran += 1
    finally:
        for process in sandbox.background:
            _stop(process)
    return ran


def _run(sandbox: Sandbox, command: list[str], step: Step, where: str) -> int:
    result = subprocess.run(command, cwd=sandbox.cwd, env=sandbox.env, capture_output=True, text=True, timeout=600)
    sandbox.log.append(f"$ {where}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.returncode


def _run_bash(sandbox: Sandbox, text: str, step: Step, where: str) -> int:
    """One command in bash; its environment and working folder afterwards carry over (export, eval, cd)."""
    state = sandbox.root / ".state"
    script = f"{text}\nstatus=$?\nenv -0 > {shlex.quote(str(state))}\nexit $status\n"
    code = _run(sandbox, ["bash", "-c", script], step, where)
    if state.exists():
        pairs = [entry.split("=", 1) for entry in state.read_text(encoding="utf-8").split("\0") if "=" in entry]
        sandbox.env = {name: value for name, value in pairs if not name.startswith("BASH_FUNC_")}
        state.unlink()
    return code


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def new_sandbox(root: Path, extra_env: dict[str, str] | None = None) -> Sandbox:
    """A working folder and a HOME of its own, the venv's commands first on PATH, no secret of the machine."""
    (root / "work").mkdir(parents=True)
    (root / "home").mkdir()
    keep = {name: value for name, value in os.environ.items()
            if name not in ("OPENAI_API_KEY", "HF_TOKEN", "LABEL_STUDIO_API_KEY", "LABEL_STUDIO_URL")}
    env = {**keep, "HOME": str(root / "home"), "PWD": str(root / "work"), "COLUMNS": "200",
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(extra_env or {})}
    return Sandbox(root, env)


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
