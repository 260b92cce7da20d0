# Two entry points: `make demo` (set up, run the main job on the bundled corpus) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
PIP    := $(BIN)/python -m pip install --quiet -c constraints.txt
# Label Studio runs from its own venv (its pins conflict with Prefect's); a migrated template database makes a
# fresh server start in seconds. Both live under .ls/ (git-ignored).
LS_VENV     := .ls/venv
LS_STAMP    := $(LS_VENV)/.installed
LS_TEMPLATE := .ls/template/label_studio.sqlite3

# lmms-eval 0.7.3 for the test that runs an exported task, in its own venv: CPU torch 2.13.0 (the machine's file),
# lmms-eval with --no-deps, then only what its CLI, task loader and OpenAI-compatible model import, at the versions
# in constraints-lmms-eval.txt (its declared requirements pull CUDA torch, wandb and more: 6.9 GB instead of 1.6 GB).
LMMS_VENV  := .ls/lmms-eval
LMMS_STAMP := $(LMMS_VENV)/.installed
LMMS_DEPS  := accelerate datasets evaluate transformers openai numpy pyyaml pillow loguru sacrebleu pytz tenacity \
              python-dotenv pytablewriter pydantic tqdm

# The review-page test renders Label Studio in headless Chromium (Debian's package) driven by playwright-core.
PW := .ls/pw/node_modules/playwright-core/package.json

.PHONY: demo test test-quick lint bench-quick clean constraints ls browser lmms-eval

# The demo installs every user-facing extra (`all`: review, dask, plots, xlsx), so each walkthrough in the README
# and docs/ runs as written after it; the tests add the test and bench extras (pyproject.toml says what each adds).
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(PIP) -e '.[all]'
	@touch $@

$(TEST_STAMP): $(STAMP)
	$(PIP) -e '.[test]'
	@touch $@

$(LS_STAMP):
	@test -x $(LS_VENV)/bin/python || $(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LS_VENV)/bin/python -m pip install --quiet "label-studio==1.23.2"
	@touch $@

$(LS_TEMPLATE): $(LS_STAMP)
	@mkdir -p .ls/template
	LABEL_STUDIO_BASE_DATA_DIR=$(CURDIR)/.ls/template DJANGO_DB=sqlite XDG_CONFIG_HOME=$(CURDIR)/.ls/template \
	  LATEST_VERSION_CHECK=false COLLECT_ANALYTICS=false \
	  $(LS_VENV)/bin/python "$$($(LS_VENV)/bin/python -c 'import label_studio, os; \
	  print(os.path.dirname(label_studio.__file__))')/manage.py" migrate -v 0
	@test -f $@

ls: $(LS_TEMPLATE)

$(LMMS_STAMP): constraints-lmms-eval.txt
	@test -x $(LMMS_VENV)/bin/python || $(PYTHON) -m venv $(LMMS_VENV)
	$(LMMS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LMMS_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(LMMS_VENV)/bin/python -m pip install --quiet --no-deps lmms-eval==0.7.3
	$(LMMS_VENV)/bin/python -m pip install --quiet -c constraints-lmms-eval.txt torch==2.13.0 $(LMMS_DEPS)
	@touch $@

lmms-eval: $(LMMS_STAMP)

browser:
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="chromium"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then echo "installing$$missing with apt-get"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

$(PW): | browser
	@mkdir -p .ls/pw
	cd .ls/pw && { test -f package.json || npm init -y >/dev/null; } && npm install --silent playwright-core

demo: $(STAMP)
	$(BIN)/curate run multiverse

# pytest exits 5 when it collects no test: not a failure of the suite. Four workers on two cores: much of the suite
# waits on servers and subprocesses. Whole files go to one worker, so a module's fixtures start once. The
# benchmarks' quick runs (tests/test_bench.py) are not tests of the product's behaviour: `make bench-quick`, which
# CI runs after the tests, so no benchmark rots.
PYTEST_ARGS ?= -n 4 --dist loadfile --ignore=tests/test_bench.py
PYTEST = $(BIN)/python -m pytest $(1); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; status=0; fi; exit $$status
test: lint $(LS_TEMPLATE) $(PW) $(LMMS_STAMP)
	@$(call PYTEST,$(PYTEST_ARGS))

# ruff's lint and format check, with the rules pyproject.toml chooses (`ruff format .` fixes the format).
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The loop while you work: the tests not marked slow, which start no server, browser or pipeline (tests/conftest.py
# marks every test using a fixture tagged @starts_server, and fails an unmarked test that starts one), so it needs
# none of Label Studio, Chromium or lmms-eval. Two workers: these tests use the CPU, not wait on servers.
QUICK_ARGS ?= -m "not slow" -n 2 --dist loadfile --ignore=tests/test_bench.py -q
test-quick: $(TEST_STAMP)
	@$(call PYTEST,$(QUICK_ARGS))

# Every bench/*.py once with --quick: it runs, prints its comparison with the naive way, writes no result.
bench-quick: $(TEST_STAMP) $(LS_TEMPLATE)
	$(BIN)/python -m pytest tests/test_bench.py -n 2 --dist load

# Re-resolve the pinned set after changing dependencies in pyproject.toml.
constraints:
	rm -rf .venv-resolve && $(PYTHON) -m venv .venv-resolve
	.venv-resolve/bin/python -m pip install --quiet --upgrade pip
	.venv-resolve/bin/python -m pip install --quiet '.[test]'
	{ echo "# Exact versions CI and 'make' install (pip install -c constraints.txt). Regenerate with 'make constraints'."; \
	  .venv-resolve/bin/python -m pip freeze --exclude benchcurate; } > constraints.txt
	rm -rf .venv-resolve

clean:
	rm -rf $(VENV) .ls outputs .pytest_cache
