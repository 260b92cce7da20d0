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

import contextlib
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

from tests.factories import make_image

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\s*$")
DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(.+?)\s*-->")
EXPECTED_EXIT = re.compile(r"\(exit (\d+)\)")
# commands CI itself runs (`.ci/run` is `make test`, which builds Label Studio's venv): shown, not run again here
RUN_BY_CI = {
    "make test": "CI runs it: .ci/run",
    "make ls": "make test builds it",
    "make test-quick": "CI's quick loop",
    "make bench-quick": "CI runs it after make test",
}
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
        result.append(
            Step(
                doc,
                first,
                "bash",
                command.rstrip("&").strip() if background else command,
                int(expected.group(1)) if expected else 0,
                background,
            )
        )
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
            return line[:index].strip(), line[index + 1 :]
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
                sandbox.background.append(
                    subprocess.Popen(
                        ["bash", "-c", text],
                        cwd=sandbox.cwd,
                        env=sandbox.env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
                time.sleep(1)
                ran += 1
                continue
            else:
                code = _run_bash(sandbox, text, step, where)
            assert code == step.expect_exit, (
                f"{where}: `{text}` ended with {code}, the guide says "
                f"{step.expect_exit}\n" + "\n".join(sandbox.log[-2:])[-6000:]
            )
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
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def new_sandbox(root: Path, extra_env: dict[str, str] | None = None) -> Sandbox:
    """A working folder and a HOME of its own, the venv's commands first on PATH, no secret of the machine."""
    (root / "work").mkdir(parents=True)
    (root / "home").mkdir()
    keep = {
        name: value
        for name, value in os.environ.items()
        if name not in ("OPENAI_API_KEY", "HF_TOKEN", "LABEL_STUDIO_API_KEY", "LABEL_STUDIO_URL")
    }
    env = {
        **keep,
        "HOME": str(root / "home"),
        "PWD": str(root / "work"),
        "COLUMNS": "200",
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        **(extra_env or {}),
    }
    return Sandbox(root, env)


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- what a guide cannot show as a command: <!-- doc-test: NAME ARGS --> ------------------------------------------


def images(sandbox: Sandbox, args: list[str]) -> None:
    """`images FOLDER COUNT`: a reader's own pictures."""
    folder = Path(args[0].replace("~", sandbox.env["HOME"], 1))
    for seed in range(int(args[1])):
        make_image(folder / f"{seed}.png", seed, (480, 360))


def model_server(sandbox: Sandbox, args: list[str]) -> None:
    """A model server where the reader's is (OPENAI_BASE_URL and 127.0.0.1:8000), answering as models and judges
    do in the paper's formats."""
    from tests.fakes.judges import marker_world
    from tests.fakes.openai_server import FakeOpenAIServer

    world = marker_world({"my-vlm": 0.5, "other-vlm": 0.8}, judge="my-judge")

    def responder(body: dict):  # structured replies (the curation stages) drawn from their schema, as by default
        return None if body.get("response_format") else world(body)

    server = FakeOpenAIServer(responder=responder, models=["my-vlm", "other-vlm", "my-judge"])
    sandbox.context.setdefault("servers", []).append(server)
    sandbox.env.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-doc-test"})
    sandbox.replacements["http://127.0.0.1:8000/v1"] = server.base_url


def hub(sandbox: Sandbox, args: list[str]) -> None:
    """`hub ORG/NAME`: the Hub stand-in where HF_ENDPOINT points, with a write token for ORG."""
    from tests.fakes.hub_server import FakeHub, Token

    token = "hf_doctestwritetoken0123456789"
    server = FakeHub({token: Token("reader", "write", (args[0].split("/")[0],))})
    sandbox.context.setdefault("servers", []).append(server)
    sandbox.env.update(
        {
            "HF_ENDPOINT": server.endpoint,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
            "HF_HOME": str(sandbox.root / "hf_home"),
        }
    )
    sandbox.replacements["hf_..."] = token


def convbench_sheet(sandbox: Sandbox, args: list[str]) -> None:
    """`convbench-sheet FILE IMAGES`: ConvBench's released spreadsheet and its picture folder, a few rows."""
    from tests.factories import CONVBENCH_COLUMNS
    from tests.factories import convbench_sheet as sheet

    rows = []
    for seed in range(3):
        make_image(sandbox.cwd / args[1] / f"{seed}.png", 40 + seed)
        rows.append(
            [
                seed + 1,
                f"{seed}.png",
                "What is drawn here?",
                "Why are the colours as they are?",
                "Write a short advertisement for it.",
                "1. mentions the colours\n2. is persuasive",
            ]
        )
    sheet(sandbox.cwd / args[0], rows, header=[*CONVBENCH_COLUMNS, "third_turn_demands"])


def questions(sandbox: Sandbox, args: list[str]) -> None:
    """`questions FILE`: a JSONL of questions, some copies with a word changed, two languages."""
    import json

    texts = [
        "What is the trend of the blue line between 2010 and 2020 in this chart?",
        "What is the trend of the blue line between 2010 and 2021 in this chart?",
        "Which room of the house is shown in the photo, and how can you tell?",
        "这张图片里的建筑是什么风格？请说明理由。",
        "How many people are waiting at the bus stop?",
    ]
    (sandbox.cwd / args[0]).write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": text}, ensure_ascii=False) + "\n" for i, text in enumerate(texts)
        ),
        encoding="utf-8",
    )


def wait_for(sandbox: Sandbox, args: list[str]) -> None:
    """`wait-for COMMAND...`: what a reader does by waiting a moment: the command until it succeeds (120 s)."""
    deadline = time.monotonic() + 120
    while subprocess.run(args, cwd=sandbox.cwd, env=sandbox.env, capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, f"`{' '.join(args)}` never succeeded"
        time.sleep(1)


def free_port(sandbox: Sandbox, args: list[str]) -> None:
    """`free-port N`: a fixed port a guide names is replaced by a free one (tests run side by side)."""
    from tests.servers import free_port as pick

    sandbox.replacements[args[0]] = str(pick())


def sample_id(sandbox: Sandbox, args: list[str]) -> None:
    """`sample-id PLACEHOLDER RELEASE`: a guide's example sample id stands for the first sample of that release."""
    import pyarrow.parquet as pq

    shard = sorted((sandbox.cwd / args[1] / "data").glob("*.parquet"))[0]
    sandbox.replacements[args[0]] = pq.read_table(shard, columns=["index"]).column(0)[0].as_py()


REVIEWER_PASSWORD = "doc-test-reviewer-pw-0123"


def label_studio(sandbox: Sandbox, args: list[str]) -> None:
    """Label Studio where the guide starts it, on a free port; the reviewers' password known to the steps below."""
    from benchcurate.annotation.team import PASSWORD_ENV
    from tests.servers import free_port as pick

    port = pick()
    sandbox.replacements["curate ls up"] = f"curate ls up --port {port}"
    sandbox.replacements["127.0.0.1:8080"] = f"127.0.0.1:{port}"
    sandbox.env[PASSWORD_ENV] = REVIEWER_PASSWORD
    sandbox.context["label_studio"] = f"http://127.0.0.1:{port}"


def _as_person(sandbox: Sandbox, email: str):
    """A Label Studio client with the person's own token, logged in through the login form as they would."""
    import httpx
    from label_studio_sdk import LabelStudio

    url = sandbox.context["label_studio"]
    with httpx.Client(base_url=url) as browser:
        browser.get("/user/login/")
        browser.post(
            "/user/login/",
            data={"email": email, "password": REVIEWER_PASSWORD, "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
            headers={"Referer": f"{url}/user/login/"},
        )
        return LabelStudio(base_url=url, api_key=browser.get("/api/current-user/token").json()["token"])


def _round_state(sandbox: Sandbox, run_id: str) -> dict:
    import json

    return json.loads((sandbox.cwd / "outputs" / "runs" / run_id / "review" / "state.json").read_text())


def annotate(sandbox: Sandbox, args: list[str]) -> None:
    """`annotate RUN PERSON... [--tie]`: each person answers every task of the round's queue yes to all three
    questions; with --tie the last person finds the first sample's answers incorrect (a tie for the adjudicator)."""
    tie = "--tie" in args
    run_id, *people = [arg for arg in args if arg != "--tie"]
    project = _round_state(sandbox, run_id)["project_id"]
    for number, email in enumerate(people):
        client = _as_person(sandbox, email)
        for index, task in enumerate(sorted(client.tasks.list(project=project), key=lambda task: task.id)):
            answers = {"natural": "yes", "correct": "yes", "needs_image": "yes"}
            if tie and index == 0 and number == len(people) - 1:
                answers["correct"] = "no"
            client.annotations.create(
                id=task.id,
                result=[
                    {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": [value]}}
                    for name, value in answers.items()
                ],
            )


def adjudicate(sandbox: Sandbox, args: list[str]) -> None:
    """`adjudicate RUN PERSON`: the adjudicator settles every open question of phase 2, siding with "yes"."""
    state = _round_state(sandbox, args[0])
    client = _as_person(sandbox, args[1])
    for task in client.tasks.list(project=state["phase2_project_id"], fields="all"):
        result = []
        for index, settle in enumerate(task.data["settle"]):
            option = next(value for value, answer in settle["answers"].items() if answer == "yes")
            result.append(
                {
                    "from_name": f"settle_{index}",
                    "to_name": f"question_{index}",
                    "type": "choices",
                    "value": {"choices": [option]},
                }
            )
        client.annotations.create(id=task.id, result=result)


def label_judgments(sandbox: Sandbox, args: list[str]) -> None:
    """`label-judgments RESULTS PERSON...`: people (added now) redo the judge's calls pushed from RESULTS: the
    first agrees with the judge on every call, the others on all but the first."""
    from benchcurate.annotation.judge_review import load_state
    from benchcurate.curation.evaluation.agreement import judge_items

    results = sandbox.cwd / args[0]
    labels = {item.item_id: (item.judge_label, item.scale) for item in judge_items(results)[1]}
    project = load_state(results).project_id
    for number, email in enumerate(args[1:]):
        subprocess.run(
            ["curate", "ls", "user", "add", email],
            cwd=sandbox.cwd,
            env=sandbox.env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        client = _as_person(sandbox, email)
        for index, task in enumerate(sorted(client.tasks.list(project=project, fields="all"), key=lambda t: t.id)):
            label, scale = labels[task.data["item_id"]]
            if number and index == 0:
                label = next(option for option in scale if option != label)
            client.annotations.create(
                id=task.id,
                result=[{"from_name": "verdict", "to_name": "shown", "type": "choices", "value": {"choices": [label]}}],
            )


def lmms_eval(sandbox: Sandbox, args: list[str]) -> None:
    """lmms-eval where a reader runs it from its own venv (`make test` builds one in .ls/lmms-eval), offline."""
    sandbox.replacements["python -m lmms_eval"] = f"{REPO / '.ls' / 'lmms-eval' / 'bin' / 'python'} -m lmms_eval"
    sandbox.env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


STEPS = {
    "label-judgments": label_judgments,
    "lmms-eval": lmms_eval,
    "images": images,
    "model-server": model_server,
    "hub": hub,
    "convbench-sheet": convbench_sheet,
    "questions": questions,
    "wait-for": wait_for,
    "free-port": free_port,
    "sample-id": sample_id,
    "label-studio": label_studio,
    "annotate": annotate,
    "adjudicate": adjudicate,
}


# --- running a guide -----------------------------------------------------------------------------------------------


def guide_sandbox(tmp_path: Path, prefect_env: dict[str, str] | None) -> Sandbox:
    sandbox = new_sandbox(tmp_path / "sandbox", prefect_env)
    (sandbox.cwd / ".venv").symlink_to(REPO / ".venv")  # `source .venv/bin/activate`, as in the checkout
    if prefect_env is None:  # the output folder's own Prefect server, as a reader without one gets
        sandbox.env.pop("PREFECT_API_URL", None)
    return sandbox


def run_guide(name: str, sandbox: Sandbox) -> None:
    """Run a guide in its sandbox, then stop every server it started."""
    try:
        assert run_doc(REPO / name, sandbox, STEPS) >= 3
    finally:
        for server in sandbox.context.get("servers", []):
            server.stop()
        subprocess.run(["curate", "prefect", "down"], cwd=sandbox.cwd, env=sandbox.env, capture_output=True, timeout=60)
        subprocess.run(["curate", "ls", "down"], cwd=sandbox.cwd, env=sandbox.env, capture_output=True, timeout=60)
