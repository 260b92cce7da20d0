"""benchcurate: curate reviewed, versioned multimodal benchmarks.

The repository keeps one folder per layer at its root (schemas/, curation/, annotation/, flows/, prompts/);
pyproject.toml installs them under this one import name, so `benchcurate.curation` is the folder curation/ and
no generic top-level module (`schemas`, `flows`, ...) lands in site-packages. Imports run one way:
schemas <- curation <- annotation <- flows (docs/architecture.md).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchcurate")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
