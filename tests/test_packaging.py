"""The install: one import name, the data files in the wheel, and a core install without extras that runs the demo."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO, run_curate

LAYERS = {
    "schemas": "schemas",
    "curation": "curation",
    "annotation": "annotation",
    "flows": "flows",
    "prompts": "prompts",
}
EXTRA_MODULES = ("openpyxl", "label_studio_sdk", "prefect_dask", "dask", "distributed", "psutil")


def setuptools_config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_benchcurate():
    listed = set(setuptools_config()["packages"])
    found = {"benchcurate"} | {
        "benchcurate." + ".".join(init.parent.relative_to(REPO).parts)
        for layer in LAYERS
        for init in (REPO / layer).rglob("__init__.py")
    }
    assert listed == found


def test_the_wheel_holds_benchcurate_and_its_data_files_and_nothing_else_at_the_top(tmp_path):
    source = tmp_path / "source"  # a copy: an in-tree build would leave build/ in the checkout
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(".git", ".venv", ".ls", "outputs", "build", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(source),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("benchcurate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"benchcurate", wheel.name.split("-py3")[0] + ".dist-info"}
    data = {
        path.relative_to(REPO).as_posix()
        for pattern in ("prompts/*/*.yaml", "curation/**/*.yaml", "curation/demo/*/*")
        for path in REPO.glob(pattern)
    }
    assert {f"benchcurate/{path}" for path in data} <= set(names)
    assert not any("maintainer" in name or "tests/" in name for name in names)


def test_no_module_imports_a_layer_by_its_bare_name():
    bare = re.compile(r"^\s*(from|import) (schemas|curation|annotation|flows|prompts)\b", re.M)
    offenders = [
        str(path.relative_to(REPO))
        for folder in (*LAYERS, "tests", "bench", "benchcurate")
        for path in (REPO / folder).rglob("*.py")
        if bare.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    for name in LAYERS:  # not importable from outside the checkout
        result = subprocess.run([sys.executable, "-c", f"import {name}"], cwd="/", capture_output=True, text=True)
        assert result.returncode == 1 and "ModuleNotFoundError" in result.stderr, name


BLOCK_EXTRAS = f"""
import importlib.abc, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRA_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: not in the core install)")
        return None
sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.mark.slow
def test_the_core_install_without_any_extra_runs_the_demo_and_releases(prefect_env, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCK_EXTRAS, encoding="utf-8")
    env = {**prefect_env, "PYTHONPATH": str(tmp_path / "site")}
    blocked = subprocess.run([sys.executable, "-c", "import openpyxl"], env={**env}, capture_output=True, text=True)
    assert "blocked: not in the core install" in blocked.stderr  # the block itself works
    result = run_curate(["run", "multiverse", "--demo", "--run-id", "core", "--progress", "none"], tmp_path, env)
    assert result.returncode == 0, result.stderr[-3000:]
    release = Path(re.search(r"release:\s+(\S+)", result.stdout).group(1))
    assert (release / "manifest.json").exists() and any((release / "plots").glob("*.png"))
    report = run_curate(["report", "core"], tmp_path, env)
    assert report.returncode == 0 and "labels_image_main.png" in report.stdout
    no_review = run_curate(["review", "push", "core"], tmp_path, env)
    assert no_review.returncode == 2 and "pip install 'benchcurate[review]'" in no_review.stderr
