"""docs/publisher.md, run as written (tests/doccommands.py)."""

import pytest

from tests.doccommands import guide_sandbox, run_guide

pytestmark = pytest.mark.slow


def test_every_command_of_the_guide_ends_as_it_says(tmp_path, prefect_env):
    run_guide("docs/publisher.md", guide_sandbox(tmp_path, prefect_env))
