#!/usr/bin/env bash
# Bootstrap and run certdp on a fresh machine that has only Python 3.11.
#   bash run.sh demo          install (once) and run the main job on generated data
#   bash run.sh test          install (once) and run the default test suite
#   bash run.sh typecheck     install (once) and type-check src/ and benchmarks/ with mypy (configured in pyproject.toml)
#   bash run.sh bench NAME    run one benchmark, e.g. paper000.decompositions (benchmarks/paper000/decompositions.py)
#   bash run.sh certdp ARGS  run the CLI from the project's environment
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
VENV=.venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Each command installs what it uses: the demo the package and its plots (a picture is part of
# the demo), everything else the test extras (every optional part, the test tools and the docs).
install() {   # install certdp[$1] once, and again whenever pyproject.toml changes
  local extras="$1" stamp="$VENV/.certdp-installed-$1"
  if [ -f "$stamp" ] && [ ! pyproject.toml -nt "$stamp" ]; then return; fi
  if [ "$extras" = plot ] && [ -f "$VENV/.certdp-installed-test" ] && [ ! pyproject.toml -nt "$VENV/.certdp-installed-test" ]; then
    return   # the test extras include plot
  fi
  echo "run.sh: installing certdp[$extras] into $VENV (the first time takes a few minutes) ..." >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q -e ".[$extras]"
  touch "$stamp"
  echo "run.sh: installed" >&2
}
cmd="${1:-demo}"
shift || true
case "$cmd" in
  demo)
    install plot
    exec "$VENV/bin/certdp" demo "$@" ;;
  test)
    install test
    set +e
    "$VENV/bin/python" -m pytest -q "$@"
    rc=$?
    set -e
    # pytest exits 5 when no test was collected: that is not a failure of the code.
    if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 0; fi
    exit "$rc" ;;
  typecheck)
    install test   # mypy, and the optional libraries the benchmarks import
    exec "$VENV/bin/python" -m mypy "$@" ;;
  bench)
    install test
    name="${1:?usage: bash run.sh bench PAPER.SCRIPT, e.g. paper000.decompositions}"; shift
    exec "$VENV/bin/python" -m "benchmarks.${name%.py}" "$@" ;;
  certdp)
    install test
    exec "$VENV/bin/certdp" "$@" ;;
  *)
    echo "usage: bash run.sh demo|test|typecheck|bench NAME|certdp ARGS" >&2; exit 2 ;;
esac
