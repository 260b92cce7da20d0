"""The README and every guide in docs/, run as written (tests/doccommands.py): each command a reader is shown runs
in a sandbox against the servers it names standing on loopback, and ends as the guide says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doccommands import REPO, STEPS, new_sandbox, run_doc, steps

GUIDES = ["README.md", "docs/curator.md", "docs/annotator.md", "docs/evaluator.md", "docs/publisher.md"]


# --- the parser, on a guide of its own ---------------------------------------------------------------------------


def test_a_guide_is_read_as_its_reader_would_type_it(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(
        "Text.\n\n<!-- doc-test: images ~/pics 2 -->\n```bash\ncurate run multiverse \\\n"
        "    --input ~/pics   # your images\n# a comment line\ncurate serve &\n"
        "curate run multiverse --run-id w --set 'a.b=#1'   # waits (exit 5)\n```\n\n"
        "```python\nprint('hi')\n```\n\n```text\nnot run\n```\n"
    )
    found = steps(guide)
    assert [(step.kind, step.text, step.expect_exit, step.background) for step in found] == [
        ("directive", "images ~/pics 2", 0, False),
        ("bash", "curate run multiverse      --input ~/pics", 0, False),
        ("bash", "curate serve", 0, True),
        ("bash", "curate run multiverse --run-id w --set 'a.b=#1'", 5, False),
        ("python", "print('hi')", 0, False),
    ]
    assert [step.line for step in found] == [3, 5, 8, 9, 12]


def test_a_command_that_ends_otherwise_than_its_guide_says_fails_with_the_place(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(
        '```bash\nexport GREETING=hello\ncd /tmp\ntest "$GREETING" = hello && test "$PWD" = /tmp\n'
        "false   # (exit 1)\ntrue   # (exit 3)\n```\n"
    )
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
    assert (REPO / "bench" / "README.md").read_text(encoding="utf-8") == summary.render(), (
        "regenerate it: python bench/summary.py"
    )


def test_every_guide_has_commands_and_names_only_known_steps():
    """Each guide is run by a module of tests/docs/, and each step it names exists."""
    for name in GUIDES:
        found = steps(REPO / name)
        assert any(step.kind == "bash" for step in found), name
        assert all(step.text.split()[0] in STEPS for step in found if step.kind == "directive"), name
        module = REPO / "tests" / "docs" / f"test_{Path(name).stem.lower()}.py"
        assert f'run_guide("{name}"' in module.read_text(encoding="utf-8"), module


MEASURED = r"\b\d+(?:\.\d+)?\s?(?:x|s|ms|MB|GB|MiB|GiB|minutes|files/s)(?![\w-])"


def _help_texts() -> list[str]:
    """Every help text `curate` shows: each command's and each of its options'."""
    import typer.main

    from benchcurate.flows.cli import app

    found, pending = [], [typer.main.get_command(app)]
    while pending:
        command = pending.pop()
        found += [command.help or ""] + [getattr(param, "help", None) or "" for param in command.params]
        pending += list(getattr(command, "commands", {}).values())
    return found


def _prose(markdown: str) -> str:
    """A page without its code blocks and tables (what a command printed is not a quoted figure)."""
    import re

    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))


def test_every_figure_the_readme_or_help_quotes_is_a_measurement():
    """A time, ratio or size in README.md or `curate ... --help` is one bench/README.md states (so they cannot
    drift apart: bench/README.md is generated from the results the benchmarks wrote)."""
    import re

    measured = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    quoted = {
        figure: where
        for where, text in [("README.md", _prose((REPO / "README.md").read_text("utf-8")))]
        + [("--help", text) for text in _help_texts()]
        for figure in re.findall(MEASURED, text)
    }
    assert len(_help_texts()) > 100  # every command was walked
    unmeasured = {
        figure: where
        for figure, where in quoted.items()
        if not re.search(r"(?<![\d.])" + re.escape(figure) + r"(?!\w)", measured)
    }
    assert unmeasured == {}
