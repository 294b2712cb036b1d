# The two commands a newcomer needs: `make demo` and `make test`. Both build .venv first.
PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
# nbgrader runs `alembic` as a subprocess: the venv's bin/ must come first on PATH.
export PATH := $(VENV)/bin:$(PATH)
# pytest-xdist workers: one more than the cores. Much of the suite waits rather than computes (a
# browser driving JupyterLab, kernels starting, notebooks run to their time limits): with one worker
# per core, a full run on 2 cores kept them busy 43% of its time (user + system against wall time).
JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: venv demo test build lab bench soak clean
venv: $(VENV)/.installed
	@test -x /usr/bin/bwrap || test "$$(id -u)" != 0 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq bubblewrap >/dev/null; } || echo "warning: could not install bubblewrap:" \
		"autograder grade will run student code without its sandbox"
	@test -n "$$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null)" || test "$$(id -u)" != 0 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
		echo "warning: could not install postgresql: the PostgreSQL grading test will be skipped"
	@test -x /usr/bin/chromium || test "$$(id -u)" != 0 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium >/dev/null; } || echo "warning: could not install chromium:" \
		"the browser test (tests/test_browser.py) will be skipped"

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

demo: venv
	$(PY) -m autograder demo

test: venv
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --no-loadscope-reorder -q --durations=25

build: venv
	$(PY) -m autograder.outside.build

bench: venv
	$(PY) -m autograder bench

# Issue 8's soak: SOAK gradings of one unit through `autograder grade`, no notebook waiting for its cell time limit.
SOAK ?= 1000
SOAK_UNIT ?= 1.3-reverse-accumulation
soak: venv
	$(PY) -m autograder bench --soak $(SOAK) $(SOAK_UNIT)

lab: venv
	$(VENV)/bin/jupyter lab release/

clean:
	rm -rf demo-course .pytest_cache .hypothesis
