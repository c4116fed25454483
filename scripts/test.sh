#!/usr/bin/env bash
# Install into .venv and run every test. pytest's exit 5 (no tests collected) is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
# lint, formatting and types before the tests (mypy about 20 s the first time, then from its cache); settings in pyproject.toml
if [ -x .venv/bin/ruff ]; then
    .venv/bin/ruff check gpuviewer tests bench scripts || { echo "ruff check failed: see the lines above ('ruff check --fix' mends most)"; exit 1; }
    .venv/bin/ruff format --check gpuviewer tests bench scripts || { echo "ruff format --check failed: the files above are not formatted ('ruff format gpuviewer tests bench scripts' formats them)"; exit 1; }
else
    echo "ruff is not installed: lint skipped"
fi
if [ -x .venv/bin/mypy ]; then
    .venv/bin/mypy || { echo "mypy failed: type errors above in gpuviewer/model, io, analysis, session or query"; exit 1; }
else
    echo "mypy is not installed: type check skipped"
fi
set +e
# two workers, each test file on one (its module fixtures open a trace once); the slowest 20 listed
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${GPUVIEWER_TEST_WORKERS:-2}" --dist loadfile --durations=20 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
exit "$rc"
