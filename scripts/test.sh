#!/usr/bin/env bash
# Runs the whole test suite in an environment of its own (.venv-test), created on first use.
# It installs the package with its test extras and a pinned CPU build of torch, then runs
# ruff, the bundle's freshness and verify checks, and pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${FSDP_SKILL_TEST_VENV:-.venv-test}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
echo "== installing the package and the test requirements"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-test.txt -e ".[dev,torch,hf]"

export PATH="$PWD/$VENV/bin:$PATH"
echo "== ruff"
ruff check .
ruff format --check .
echo "== bundle is up to date with the knowledge"
fsdp-skill render --check
echo "== verify the shipped bundle"
fsdp-skill verify
echo "== pytest"
python -m pytest -n "${PYTEST_WORKERS:-2}" --durations=15 "$@"
