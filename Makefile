# tradingsite: `make run` starts the embedded site, `make test` lints and runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test suite lint bench install install-dev migrate demo clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: requirements.txt requirements.lock | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt -c requirements.lock
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt requirements.lock $(VENV)/.installed
	$(BIN)/pip install -q -r requirements-dev.txt -c requirements.lock
	touch $@

# Browser assets (lightweight-charts, swagger-ui-dist) come from npm, pinned by package-lock.json;
# --ignore-scripts: they are static files, and no install hook (analytics) runs here.
# Without npm the install fails here, loudly, rather than serving chartless pages.
node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "make install: npm (Node 20) is needed for the dashboard's chart library" >&2; exit 1; }
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

install: $(VENV)/.installed node_modules/.installed
install-dev: $(VENV)/.installed-dev node_modules/.installed

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py loaddemo

run: demo
	$(BIN)/python manage.py runsite --host $(HOST) --port $(PORT)

# Style, types and import contracts; configuration in pyproject.toml.
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo --no-cache

test: install-dev lint suite

# The suite alone (CI lints once, then runs it on each database in turn).
# Exit code 5 means pytest collected nothing: that is a failure here, never a pass.
suite: install-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$code

bench: install-dev
	$(BIN)/python bench/run.py

# Re-pin every transitive version from the current virtualenv.
lock: install-dev
	{ echo "# Every installed version, transitive ones included: pip installs with -c requirements.lock."; \
	  echo "# Regenerate on purpose after changing requirements*.txt: make lock"; \
	  $(BIN)/pip freeze --exclude pyflakes; } > requirements.lock

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis .mypy_cache .ruff_cache node_modules
