# Two entry points: `make demo` (set up, run the main job on the bundled corpus) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test clean constraints

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	@touch $@

demo: $(STAMP)
	$(BIN)/curate run multiverse

# pytest exits 5 when it collects no test: not a failure of the suite.
test: $(STAMP)
	@$(BIN)/python -m pytest $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; status=0; fi; exit $$status

# Re-resolve the pinned set after changing dependencies in pyproject.toml.
constraints:
	rm -rf .venv-resolve && $(PYTHON) -m venv .venv-resolve
	.venv-resolve/bin/python -m pip install --quiet --upgrade pip
	.venv-resolve/bin/python -m pip install --quiet '.[test]'
	{ echo "# Exact versions CI and 'make' install (pip install -c constraints.txt). Regenerate with 'make constraints'."; \
	  .venv-resolve/bin/python -m pip freeze --exclude benchcurate; } > constraints.txt
	rm -rf .venv-resolve

clean:
	rm -rf $(VENV) outputs .pytest_cache
