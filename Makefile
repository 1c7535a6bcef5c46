# Two commands for a fresh machine (see README):
#   make book   install everything into .venv and build the book into _build/html
#   make test   build the book, then run every test: package unit tests, strict nbval over every chapter,
#               the student editions, browser tests of the built book, and the widget tests on ipywidgets 7.7.1
# Python 3.11 (the course pins torch==2.13.0 for it); python3 where no python3.11 is on the PATH
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Colab's ipywidgets 7.7.1, in an environment of its own
VENV7  := .venv-ipyw7
STAMP7 := $(VENV7)/.installed

.PHONY: book test test-ipywidgets7 install outputs sync student clean vendor browser-test

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml attention_lab/__init__.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# self-hosted JS: `npm ci` from package-lock.json, then copy into book/_static/vendor/ (no npm: CDN fallback, with a notice)
vendor: install
	$(BIN)/python -m course vendor

book: install vendor
	$(BIN)/python -m course check
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "the book is at $(CURDIR)/_build/html/index.html"

# every run shuffles the order of the test files (conftest.py); pytest prints the seed, and
# `make test TEST_SEED=N` repeats an order; -rs names every skipped test and why (no root, no bubblewrap)
ifndef TEST_SEED
TEST_SEED := $(shell od -An -N2 -tu2 /dev/urandom | tr -d ' ')
endif

test: book $(STAMP7)
	$(BIN)/python -m pytest -n 2 --dist loadscope --shuffle-modules $(TEST_SEED) -rs --nbval lessons tests
	$(MAKE) --no-print-directory test-ipywidgets7

$(STAMP7): tests/requirements-ipywidgets7.txt pyproject.toml
	$(PYTHON) -m venv $(VENV7)
	$(VENV7)/bin/python -m pip install --quiet --upgrade pip
	$(VENV7)/bin/python -m pip install --quiet -r tests/requirements-ipywidgets7.txt
	$(VENV7)/bin/python -m pip install --quiet --no-deps -e .
	touch $(STAMP7)

test-ipywidgets7: $(STAMP7)
	$(VENV7)/bin/python -m pytest -q -W "ignore::DeprecationWarning" tests/test_explorers.py tests/test_plots.py tests/test_checks.py

# the built book in headless Chromium only (needs `make book`)
browser-test: install
	$(BIN)/python -m pytest -n 2 --dist loadscope tests/browser

# maintainers: after editing a notebook or the package, regenerate the stored outputs and commit them
# (with notebooks/, which follows lessons/: see `launch`)
outputs: install
	$(BIN)/python -m course execute
	$(BIN)/python -m course student

sync: install
	$(BIN)/python -m course sync
	$(BIN)/python -m course student

# the notebooks Colab, Binder and `jupyter lab notebooks/` open: notebooks/NN_slug.ipynb, each chapter in plain
# Markdown (commit them; `make book` fails when they are stale), and the student editions in student/
.PHONY: launch
launch: install
	$(BIN)/python -m course launch

# instructors: student/NN_slug.ipynb and a zip per chapter, solutions removed
student: install
	$(BIN)/python -m course student

# keypress -> painted picture in a real JupyterLab (limit 25 ms) and in the built book (16.7 ms), median and
# p90 per chapter (course/bench/keypress.py; several minutes; the page half needs `make book`);
# BASELINE=path/to/other/_build/html presses that build's pages too, in turn (page weights: bench-pages);
# CHAPTERS=01,04 and PRESSES=N narrow it
.PHONY: bench-keypress
bench-keypress: install
	$(BIN)/python -m course bench-keypress $(if $(BASELINE),--baseline $(BASELINE)) $(if $(CHAPTERS),--chapters $(CHAPTERS)) $(if $(PRESSES),--presses $(PRESSES))

# the weight of a first visit of every page, gzipped, every request added (course/bench/pages.py; needs
# `make book`); BASELINE=path/to/other/_build/html measures another build beside it, in the same run
.PHONY: bench-pages
bench-pages: install
	$(BIN)/python -m course bench-pages $(if $(BASELINE),--baseline $(BASELINE))

# chapters 6 and 7: train the head model, the bigram, the two variants and the four-head model from scratch (seeded,
# CPU) and write their weights and training log into attention_lab/data/ (course/train.py; 2.5 to 6 minutes on the
# 2-core machine, by its load: the shipped run took the `wall_time_s` of attention_lab/data/training_log.json, 151 s)
.PHONY: train
train: install
	$(BIN)/python -m course train

clean:
	rm -rf _build

# maintainers: release a version: `make release VERSION=0.2.0` sets it in attention_lab/__init__.py (pyproject reads it there), dates
# CHANGELOG.md's "Unreleased" entry and points bootstrap cells and launch links at v0.2.0 (TAG=1: commit and tag too)
.PHONY: release
release: install
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=X.Y.Z [TAG=1]" >&2; exit 2; }
	$(BIN)/python -m course release $(VERSION) $(if $(TAG),--tag)

# instructors: the release tags vX.Y.Z in this clone. A clone or fork of main alone has none: fetch them from the
# course (the remote `upstream` of a fork made with `gh repo fork`) where it can, then tag each commit that
# `make release` made ("Release X.Y.Z") and is still untagged, so `git switch --detach vX.Y.Z` works offline too
.PHONY: release-tags
release-tags:
	@if git remote | grep -qx upstream; then git fetch --quiet --tags upstream || echo "could not fetch upstream's tags; using this clone's release commits"; fi
	@git log --format='%H %s' | sed -n 's/^\([0-9a-f]*\) Release \([0-9][0-9.]*\)$$/\1 \2/p' | \
	while read -r commit version; do \
	  if git rev-parse --quiet --verify "refs/tags/v$$version" >/dev/null; then echo "v$$version: already here"; \
	  else git tag "v$$version" "$$commit" && echo "v$$version: tagged $$commit, the commit that released it"; fi; \
	done

# instructors: the graded editions, graded/NN_slug/ per chapter: student/NN_slug.ipynb to hand out and
# autograder/NN_slug-autograder.zip for Gradescope or `otter run` (course/graded_edition.py, otter-grader);
# otter first grades each chapter's own solutions and stops unless they get full marks (FAST=1 skips that)
.PHONY: graded
graded: install
	$(BIN)/python -m course graded $(if $(FAST),--no-run-tests)

# instructors: grade a folder of submissions of one chapter, each in a bubblewrap sandbox, scored by a clean
# judge process (course/grade.py): make grade CHAPTER=05_one_head SUBMISSIONS=submissions/ OUT=grades/ [SEED=N]
.PHONY: grade
grade: install
	@test -n "$(CHAPTER)" -a -n "$(SUBMISSIONS)" -a -n "$(OUT)" || \
	  { echo "usage: make grade CHAPTER=05_one_head SUBMISSIONS=folder/ OUT=folder/ [SEED=N]"; exit 2; }
	$(BIN)/python -m course grade "$(CHAPTER)" "$(SUBMISSIONS)" --out "$(OUT)" $(if $(SEED),--seed $(SEED))

# instructors: the book without solutions, into _build/html as usual (what the deploy workflow publishes with
# BOOK_SOLUTIONS=hidden): exercises and checks stay, every solution goes (book/_ext/hide_solutions.py)
.PHONY: book-without-solutions
book-without-solutions: install vendor
	$(BIN)/python -m course check
	BOOK_SOLUTIONS=hidden $(BIN)/jupyter-book build . -W -n --keep-going
	@echo "the book without solutions is at $(CURDIR)/_build/html/index.html"
