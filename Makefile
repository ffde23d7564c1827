# Every target uses the project's own virtual environment (override: make VENV=/path/to/venv ...).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
STAMP := $(VENV)/.rlbench-installed
SUITE ?= suites/quick.toml

.PHONY: install install-extras browser bench bench-cluster check-cluster lint test test-slow envzoo report compare ci-report check-overhead check-tune check-tune-real check-tune-train check-history claims claims-stability \
	device-kit device-rehearse reference docs clean

install: $(STAMP)

# Re-installs only when the pins or the package metadata change.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -c constraints.txt torch==2.13.0
	$(PY) -m pip install -c constraints.txt -e ".[all]"
	$(PY) -m pip check
	# torchrl's segment trees for this torch, compiled now (cached) rather than in a prioritized replay cell
	$(PY) -c "from adapters.torchrl import ensure_segment_trees; ensure_segment_trees()"
	touch $(STAMP)

# Adapters that cannot share the main environment (Sample Factory, Reverb, Brax, RLlib, PufferLib, gymnasium 1.4)
# get their own, pinned by adapters/envs/<name>.txt and cached under $$RLBENCH_VENVS (default .venvs/). `rlbench run`
# builds a missing one on first use; this builds them ahead (ENVS="sample-factory reverb" for a subset).
ENVS ?=
install-extras: install
	$(VENV)/bin/rlbench envs --build $(ENVS)

bench: install
	$(VENV)/bin/rlbench run $(SUITE)

# Debian's Chromium, for the tests that open the report in a real browser (scripts/check_report.py).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	command -v chromium >/dev/null || ($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium)

# The adapters with their own environment are tested for real, so their environments are built first (cached).
# `make test` leaves out the few tests marked slow (real trainings, clusters, isolated envs' own suites);
# `make test-slow` runs just those, and CI runs both.
# The layering (import-linter contracts in pyproject.toml: the contract is a leaf, the core imports no adapter
# and no framework, adapters see the core only through rlbench.api) and ruff.
lint: install
	$(VENV)/bin/ruff check rlbench adapters tests scripts
	$(PY) scripts/lint_imports.py

# make test runs the tests on TEST_WORKERS workers, one per core by default (pytest-xdist: each test in one worker, as
# they must pass with another run beside them). make test-slow too, each file's tests on one worker (a module
# fixture runs a suite once for several tests), each test given 20 minutes (compiles and kit packing, two at a
# time); then one at a time those marked `exclusive` (faults, clusters, bisect's timing) or `threaded_runtime`
# (JAX or Ray in the test process: after them no test may fork it). Both parts run; either failing fails it.
TEST_WORKERS ?= auto
test: install install-extras browser lint
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --durations=15

test-slow: install install-extras browser envzoo
	$(PY) -m pytest -q -m "slow and not exclusive and not threaded_runtime" -n $(TEST_WORKERS) --dist loadfile \
	  --timeout 1200 --durations=15; rc=$$?; \
	$(PY) -m pytest -q -m "slow and (exclusive or threaded_runtime)" --durations=15 || rc=1; exit $$rc

# Third-party env packages (tests/e2e/envzoo/requirements.txt) in a folder of their own, for tests/e2e/test_env_zoo.py.
ENVZOO := .envzoo
envzoo: $(ENVZOO)/.installed
$(ENVZOO)/.installed: tests/e2e/envzoo/requirements.txt | install
	rm -rf $(ENVZOO)
	$(PY) -m pip install -q --target $(ENVZOO) --no-deps -r tests/e2e/envzoo/requirements.txt
	touch $@

# SUITE across a Ray cluster simulated on this machine (CLUSTER_NODES nodes of CLUSTER_CPUS CPUs, cores of their
# own), as `rlbench run SUITE --cluster ADDRESS` runs it across real nodes. check-cluster: wall time and figures of
# the same 1-core sweep here, on 1 node and on CLUSTER_NODES nodes (a benchmark, not a test).
CLUSTER_NODES ?= 2
CLUSTER_CPUS ?= 1
bench-cluster: install
	$(PY) -m rlbench.running.cluster.simulated --nodes $(CLUSTER_NODES) --cpus $(CLUSTER_CPUS) -- \
		$(VENV)/bin/rlbench run $(SUITE) --cluster {address}
check-cluster: install
	$(PY) scripts/check_cluster.py --nodes $(CLUSTER_NODES) $(ARGS)

# Rebuild CSV and HTML of a run (default: the last one) from its results.jsonl.
DIR ?= reports/latest
report: install
	$(VENV)/bin/rlbench report $(DIR)

# Run against run: exits 1 when a cell is slower by more than THRESHOLD and significantly so.
THRESHOLD ?= 10%
compare: install
	$(VENV)/bin/rlbench compare $(BASE) $(NEW) --threshold $(THRESHOLD)

# For a CI job: run SUITE into CI_OUT (CSV, HTML) and, given BASE=<an earlier run dir>, gate on the comparison;
# given HISTORY=<a history file>, gate on the history instead or beside it (rlbench history check --confirm), then
# add the run to it.
CI_OUT ?= reports/ci
REPEATS ?=
HISTORY ?=
ci-report: install
	rm -rf $(CI_OUT)
	$(VENV)/bin/rlbench run $(SUITE) --out $(CI_OUT) $(if $(REPEATS),--repeats $(REPEATS))
	$(if $(BASE),$(VENV)/bin/rlbench compare $(BASE) $(CI_OUT) --threshold $(THRESHOLD))
	$(if $(HISTORY),$(VENV)/bin/rlbench history check $(CI_OUT) --db $(HISTORY) --confirm --add)

# The harness against a bare hand-written loop of the same library calls, side by side.
check-overhead: install
	$(PY) scripts/check_overhead.py

# Does `rlbench history check` tell a regression from this machine's noise? 20 A/A runs of suites/history.toml
# and runs with one cell slowed 5% and 10%: recall and false alarms against `rlbench compare` (~15 min here).
check-history: install
	$(PY) scripts/check_history.py $(ARGS)

# Is `rlbench tune` right? Its pick against an exhaustive sweep of the same candidates on a panel of synthetic
# envs (a benchmark, not a test: ARGS="--budget 60s --sizes 2,4,8,16,32" and more, see the script).
check-tune: install
	$(PY) scripts/check_tune.py $(ARGS)

# The same against env packages users train on (a driving simulator, Box2D, Atari through ALE with the CNN, MuJoCo,
# crafter's pixels with the CNN, MiniGrid's screen in a Dict, popgym-arcade's JAX pixels, highway-env's multi-agent
# intersection), installed into .envzoo as a user would, each tune from an empty calibration cache
# (ARGS="--envs highway --sizes 1,2,4,8,16").
check-tune-real: install envzoo
	$(PY) scripts/check_tune.py --panel real --budget 3m --tune-adapters all --fresh-calibration $(ARGS)

# Is `rlbench tune --train` right? On a classic-control task, a pixel task with the CNN (MinAtar's Breakout, from
# .envzoo) and a continuous-control task (MuJoCo's InvertedPendulum): tune --train ppo to the task's target return,
# then every configuration it could race trained to the target on 3 seeds; its pick within 1.2x of the best median
# (a benchmark, not a test: ~90 min on 2 cores; ARGS="--tasks cartpole --budget 10m --sizes 4,8,16").
check-tune-train: install envzoo
	$(PY) scripts/check_tune_train.py $(ARGS)

# The claims matrix of every committed reference set (its claims.csv and claims.md) and docs/claims.md from them.
claims: install
	$(PY) scripts/claims_doc.py $(ARGS)

# Verdict stability: the claims' cells (suites/validate.toml) run 3 times on this machine, each run's claims judged
# on their own, and per claim how often its verdict held; fails where one flipped between reproduced and not
# reproduced (~50 min on 2 cores). OUT=DIR (default reports/claims-stability); ARGS="--noise-from AA_RUN...".
claims-stability: install
	$(PY) scripts/claims_stability.py --out $(or $(OUT),reports/claims-stability) $(ARGS)

# The device kit: the wheels a lent GPU machine lacks, per part (suites/device/), in .device-kit/, and the calls to
# make there (scripts/device_run.sh PART runs on that machine). REHEARSE=1: the same for this machine's Python.
device-kit: install
	$(PY) scripts/device_kit.py build $(if $(REHEARSE),--rehearse)

# Each part here on CPU at tiny sizes, as CI runs it: the GPU cells are `unsupported: no CUDA device`.
DEVICE_PARTS ?= gpu-policy gpu-jax gpu-torch gpu-physics gpu-warp gpu-train cores16 tune16
device-rehearse: install
	$(PY) scripts/device_kit.py build --rehearse
	for p in $(DEVICE_PARTS); do bash scripts/device_run.sh $$p --rehearse || exit 1; done

# The reference runs of every suite that fits this machine (hours), at one commit, into reports/reference/MACHINE/
# with their table; run again at the same commit, it resumes (SUITES="quick replay" for some; scripts/reference_runs.py).
MACHINE ?=
SUITES ?=
reference: install
	$(PY) scripts/reference_runs.py --machine "$(MACHINE)" --suites "$(SUITES)"

# The documentation site (mkdocs.yml, docs/) into site/, offline; strict: a broken link or anchor, or a page left
# out of the nav, fails the build. NO_MKDOCS_2_WARNING: no Material end-of-life banner in the log.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf reports/2* reports/latest .pytest_cache
