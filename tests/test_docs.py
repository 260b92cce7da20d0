"""The README and every guide in docs/, run as written (tests/doccommands.py): each command a reader is shown runs
in a sandbox against the servers it names standing on loopback, and ends as the guide says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doccommands import REPO, Sandbox, new_sandbox, run_doc, steps
from tests.factories import make_image

GUIDES = ["README.md", "docs/curator.md", "docs/annotator.md", "docs/evaluator.md", "docs/publisher.md"]


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

    server = FakeOpenAIServer(responder=marker_world({"my-vlm": 0.5, "other-vlm": 0.8}, judge="my-judge"),
                              models=["my-vlm", "other-vlm", "my-judge"])
    sandbox.context.setdefault("servers", []).append(server)
    sandbox.env.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-doc-test"})
    sandbox.replacements["http://127.0.0.1:8000/v1"] = server.base_url


def hub(sandbox: Sandbox, args: list[str]) -> None:
    """`hub ORG/NAME`: the Hub stand-in where HF_ENDPOINT points, with a write token for ORG."""
    from tests.fakes.hub_server import FakeHub, Token

    token = "hf_doctestwritetoken0123456789"
    server = FakeHub({token: Token("reader", "write", (args[0].split("/")[0],))})
    sandbox.context.setdefault("servers", []).append(server)
    sandbox.env.update({"HF_ENDPOINT": server.endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0",
                        "HF_DATASETS_OFFLINE": "0", "HF_HOME": str(sandbox.root / "hf_home")})
    sandbox.replacements["hf_..."] = token


def convbench_sheet(sandbox: Sandbox, args: list[str]) -> None:
    """`convbench-sheet FILE IMAGES`: ConvBench's released spreadsheet and its picture folder, a few rows."""
    from tests.factories import CONVBENCH_COLUMNS, convbench_sheet as sheet

    rows = []
    for seed in range(3):
        make_image(sandbox.cwd / args[1] / f"{seed}.png", 40 + seed)
        rows.append([seed + 1, f"{seed}.png", "What is drawn here?", "Why are the colours as they are?",
                     "Write a short advertisement for it.", "1. mentions the colours\n2. is persuasive"])
    sheet(sandbox.cwd / args[0], rows, header=[*CONVBENCH_COLUMNS, "third_turn_demands"])


def questions(sandbox: Sandbox, args: list[str]) -> None:
    """`questions FILE`: a JSONL of questions, some copies with a word changed, two languages."""
    import json

    texts = ["What is the trend of the blue line between 2010 and 2020 in this chart?",
             "What is the trend of the blue line between 2010 and 2021 in this chart?",
             "Which room of the house is shown in the photo, and how can you tell?",
             "这张图片里的建筑是什么风格？请说明理由。", "How many people are waiting at the bus stop?"]
    (sandbox.cwd / args[0]).write_text("".join(json.dumps({"id": f"q{i}", "question": text}, ensure_ascii=False)
                                               + "\n" for i, text in enumerate(texts)), encoding="utf-8")


def wait_for(sandbox: Sandbox, args: list[str]) -> None:
    """`wait-for COMMAND...`: what a reader does by waiting a moment: the command until it succeeds (120 s)."""
    import subprocess
    import time

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
        browser.post("/user/login/", data={"email": email, "password": REVIEWER_PASSWORD,
                                           "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
                     headers={"Referer": f"{url}/user/login/"})
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
            client.annotations.create(id=task.id, result=[
                {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": [value]}}
                for name, value in answers.items()])


def adjudicate(sandbox: Sandbox, args: list[str]) -> None:
    """`adjudicate RUN PERSON`: the adjudicator settles every open question of phase 2, siding with "yes"."""
    state = _round_state(sandbox, args[0])
    client = _as_person(sandbox, args[1])
    for task in client.tasks.list(project=state["phase2_project_id"], fields="all"):
        result = []
        for index, settle in enumerate(task.data["settle"]):
            option = next(value for value, answer in settle["answers"].items() if answer == "yes")
            result.append({"from_name": f"settle_{index}", "to_name": f"question_{index}", "type": "choices",
                           "value": {"choices": [option]}})
        client.annotations.create(id=task.id, result=result)


STEPS = {"label-studio": label_studio, "annotate": annotate, "adjudicate": adjudicate, "sample-id": sample_id, "images": images, "model-server": model_server, "hub": hub, "convbench-sheet": convbench_sheet,
         "questions": questions, "wait-for": wait_for, "free-port": free_port}


# --- the parser, on a guide of its own ---------------------------------------------------------------------------

def test_a_guide_is_read_as_its_reader_would_type_it(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text("Text.\n\n<!-- doc-test: images ~/pics 2 -->\n```bash\ncurate run multiverse \\\n"
                     "    --input ~/pics   # your images\n# a comment line\ncurate serve &\n"
                     "curate run multiverse --run-id w --set 'a.b=#1'   # waits (exit 5)\n```\n\n"
                     "```python\nprint('hi')\n```\n\n```text\nnot run\n```\n")
    found = steps(guide)
    assert [(step.kind, step.text, step.expect_exit, step.background) for step in found] == [
        ("directive", "images ~/pics 2", 0, False),
        ("bash", "curate run multiverse      --input ~/pics", 0, False),
        ("bash", "curate serve", 0, True),
        ("bash", "curate run multiverse --run-id w --set 'a.b=#1'", 5, False),
        ("python", "print('hi')", 0, False)]
    assert [step.line for step in found] == [3, 5, 8, 9, 12]


def test_a_command_that_ends_otherwise_than_its_guide_says_fails_with_the_place(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text("```bash\nexport GREETING=hello\ncd /tmp\ntest \"$GREETING\" = hello && test \"$PWD\" = /tmp\n"
                     "false   # (exit 1)\ntrue   # (exit 3)\n```\n")
    sandbox = new_sandbox(tmp_path / "box")
    with pytest.raises(AssertionError, match=r"guide.md:6: `true` ended with 0, the guide says 3"):
        run_doc(guide, sandbox, STEPS)


# --- the guides ------------------------------------------------------------------------------------------------------

def test_the_measurements_page_is_current():
    """bench/README.md is generated from bench/results/ (python bench/summary.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_summary", REPO / "bench" / "summary.py")
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    assert (REPO / "bench" / "README.md").read_text(encoding="utf-8") == summary.render(), \
        "regenerate it: python bench/summary.py"


def test_every_guide_has_commands_and_names_only_known_steps():
    for name in GUIDES:
        found = steps(REPO / name)
        assert any(step.kind == "bash" for step in found), name


def _sandbox(tmp_path: Path, prefect_env: dict[str, str] | None) -> Sandbox:
    sandbox = new_sandbox(tmp_path / "sandbox", prefect_env)
    (sandbox.cwd / ".venv").symlink_to(REPO / ".venv")  # `source .venv/bin/activate`, as in the checkout
    if prefect_env is None:  # the output folder's own Prefect server, as a reader without one gets
        sandbox.env.pop("PREFECT_API_URL", None)
    return sandbox


def _run_guide(name: str, sandbox: Sandbox) -> None:
    try:
        assert run_doc(REPO / name, sandbox, STEPS) >= 3
    finally:
        for server in sandbox.context.get("servers", []):
            server.stop()
        import subprocess

        subprocess.run(["curate", "prefect", "down"], cwd=sandbox.cwd, env=sandbox.env, capture_output=True,
                       timeout=60)
        subprocess.run(["curate", "ls", "down"], cwd=sandbox.cwd, env=sandbox.env, capture_output=True, timeout=60)


@pytest.mark.slow
def test_the_readme(tmp_path, prefect_env):
    _run_guide("README.md", _sandbox(tmp_path, prefect_env))


@pytest.mark.slow
def test_the_curator_guide(tmp_path):
    _run_guide("docs/curator.md", _sandbox(tmp_path, None))


@pytest.mark.slow
def test_the_publisher_guide(tmp_path, prefect_env):
    _run_guide("docs/publisher.md", _sandbox(tmp_path, prefect_env))


@pytest.mark.slow
def test_the_annotator_guide(tmp_path, prefect_env):
    _run_guide("docs/annotator.md", _sandbox(tmp_path, prefect_env))
