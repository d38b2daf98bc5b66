# The README's two commands: `make demo` and `make test`. Both create .venv themselves.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml .ci/uv-excludes.txt Makefile | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# uv installs from its cache alone when the cache holds every package and the index pages the
# resolution needs (a machine that made a venv before: 16 s where asking the index again about
# each of ~210 packages took 38 s), else from the index as usual. `make clean venv UV_FIRST=`
# asks the index, to take releases newer than the cache knows. (Spark's files are then the same
# files from venv to venv, so the tests' Spark home of links to them, tests/spark_home.py, is the
# same folder for every clean checkout, and the jobs' class-data archive made by one serves the next.)
UV_FIRST ?= --offline
UV_FALLBACK = echo "uv's cache lacks something: installing from the package index"

.PHONY: venv browser test test-fast test-compat demo lint clean bench bench-large bench-indexes bench-s3 reliability dist screenshots

INSTALL_DEV = --excludes .ci/uv-excludes.txt -e '.[dev]'
# What runs in the virtualenv writes the bytecode of what it imports (this checkout's modules and
# the packages'), once, as Python does by default; an environment with PYTHONDONTWRITEBYTECODE
# set (this machine's) would make every process (each test worker's collection, every Airflow,
# CLI and job process) compile them again. Packages are not compiled at install (16 -> 1.4 s):
# the tests compile the third they import, busy CPU of a full run within its noise (1,392-1,457
# CPU-s in two runs against 1,402-1,421 with compiled packages).
RUN_ENV = env -u PYTHONDONTWRITEBYTECODE

venv: $(STAMP)

$(STAMP): pyproject.toml .ci/uv-excludes.txt Makefile
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check uv
	# pyspark-client (a dependency of the Spark provider) installs pyspark 4.2's Python files
	# over pyspark 4.3's, leaving 4.2 Python on 4.3 jars (mapInArrow then fails with a Py4JError):
	# exclude it (docs/quickstart.md, "Install in your Airflow").
	$(VENV)/bin/uv pip install $(UV_FIRST) --python $(PY) $(INSTALL_DEV) 2>/dev/null || \
		{ $(UV_FALLBACK); $(VENV)/bin/uv pip install --python $(PY) $(INSTALL_DEV); }
	# pyspark comes as an sdist: uv unpacks (and builds) a new revision of it whenever it
	# revalidates the download and keeps the old ones (1-2 GB per clean venv; a machine that
	# makes many, as CI does, filled its disk): drop what no venv can use any more
	$(VENV)/bin/uv cache prune --quiet
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Tests run in pytest-xdist workers, one more than the cores (the tests wait a good part of their
# time on spark-submit, Airflow and the S3 server's processes: on 2 cores, 3 workers took 15-16
# minutes where 2 took 17-19; 4 took 776 s where 3 took 700-762, their processes competing for
# the cores), each test file in one worker (its module fixtures built once),
# every file that uses the shared SparkSession in the same one (tests/conftest.py: one
# session JVM started and warmed up, not one per worker: 907 -> 850 s, 1,751 -> 1,636 CPU-s),
# and those using the standalone cluster in one (one cluster started); Airflow's database is
# each worker's own. JOBS=0 runs them in this process.
JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
XDIST = -n $(JOBS) --dist loadfile

test: venv browser
	$(RUN_ENV) $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The Lake tables page's test drives a real browser: Debian's chromium and its chromedriver,
# installed here when missing where apt runs as root (as on CI); elsewhere install them yourself
# (the test fails saying so)
browser:
	@test -x /usr/bin/chromedriver -a -x /usr/bin/chromium || \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get install -y -q chromium chromium-driver || \
				(apt-get update -q && apt-get install -y -q chromium chromium-driver); \
		else echo "make browser: install chromium and chromium-driver (Debian packages) for the UI page's test"; fi

# The screenshots of docs/run-a-lake.md, taken by the page's browser test
screenshots: venv browser
	LAKE_SCREENSHOTS=docs/img $(RUN_ENV) $(PY) -m pytest tests/provider/test_lake_tables_page.py $(PYTEST_ARGS)

# The inner loop: the core and the command line without Spark, Airflow or slow tests (the
# markers of tests/conftest.py; its budget is 3 minutes). SPARK_HOME leads nowhere, so a test that
# starts Spark without the `spark` marker fails here instead of slowing the lane down.
test-fast: venv
	$(RUN_ENV) SPARK_HOME=/nonexistent/test-fast-starts-no-spark $(PY) -m pytest $(XDIST) \
		-m "not spark and not airflow and not slow" $(PYTEST_ARGS)

# The provider's tests on the lowest Airflow and Spark provider versions pyproject.toml admits
# (`.ci/lowest.py` reads them from its ranges), in a second virtualenv; `make test` runs the newest.
LOWEST_VENV := .venv-lowest
LOWEST_PY   := $(LOWEST_VENV)/bin/python
LOWEST_STAMP := $(LOWEST_VENV)/.installed-$(shell cat pyproject.toml .ci/uv-excludes.txt .ci/lowest.py Makefile | cksum | cut -d' ' -f1)

INSTALL_LOWEST = $(INSTALL_DEV) --constraints $(LOWEST_VENV)/constraints.txt

$(LOWEST_STAMP): pyproject.toml .ci/uv-excludes.txt .ci/lowest.py Makefile
	@test -x $(LOWEST_PY) || python3 -m venv $(LOWEST_VENV)
	$(LOWEST_PY) -m pip install -q --disable-pip-version-check uv
	python3 .ci/lowest.py > $(LOWEST_VENV)/constraints.txt
	$(LOWEST_VENV)/bin/uv pip install $(UV_FIRST) --python $(LOWEST_PY) $(INSTALL_LOWEST) 2>/dev/null || \
		{ $(UV_FALLBACK); $(LOWEST_VENV)/bin/uv pip install --python $(LOWEST_PY) $(INSTALL_LOWEST); }
	$(LOWEST_VENV)/bin/uv cache prune --quiet
	rm -f $(LOWEST_VENV)/.installed-*
	touch $(LOWEST_STAMP)

test-compat: $(LOWEST_STAMP)
	$(RUN_ENV) $(LOWEST_PY) -m pytest tests/provider $(PYTEST_ARGS)

# `make demo BASE=s3://bucket/prefix` puts the lake on an object store (docs/object-stores.md;
# only a BASE given on make's command line counts, not one exported in the shell);
# DEMO_ARGS: more options of `python -m airflow_lake.demo` (e.g. --storage-option KEY=VALUE)
demo: venv
	$(RUN_ENV) $(PY) -m airflow_lake.demo $(if $(filter command line,$(origin BASE)),--base '$(BASE)') $(DEMO_ARGS)

# The wheel and the sdist of airflow-lake into $(DIST) (it is on no package index: install the
# wheel on Airflow workers and Spark nodes, docs/quickstart.md)
DIST ?= dist
dist: venv
	rm -f $(DIST)/airflow_lake-*
	$(VENV)/bin/uv build --quiet --out-dir $(DIST) .

lint: venv
	$(VENV)/bin/ruff check airflow_lake tests bench spark_jobs dags

clean:
	rm -rf $(VENV) $(LOWEST_VENV) .pytest_cache

reliability: venv
	$(RUN_ENV) $(PY) -m tests.reliability.harness --large

bench: venv
	$(RUN_ENV) $(PY) -m bench.suite

bench-large: venv
	$(RUN_ENV) $(PY) -m bench.suite --large

bench-indexes: venv
	$(RUN_ENV) $(PY) -m bench.indexes

bench-s3: venv
	$(RUN_ENV) $(PY) -m bench.s3
