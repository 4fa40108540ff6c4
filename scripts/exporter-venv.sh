#!/bin/sh
# Make .venvs/NAME: the virtual environment of an exporter whose pins clash with the project's own (make matrix
# runs each such exporter in a subprocess of its python), exactly as locks/NAME.txt says (scripts/lock.py holds
# each environment's inputs). A fresh venv each time, so that a changed lock leaves nothing stale behind.
#   sh scripts/exporter-venv.sh optimum|mobius
set -eu
NAME=${1:?usage: exporter-venv.sh optimum|mobius}
LOCK=locks/$NAME.txt
if [ ! -f "$LOCK" ]; then
  echo "error: exporter venv $NAME has no lock $LOCK; choose optimum or mobius (or add it to scripts/lock.py)" >&2
  exit 2
fi
VENV=.venvs/$NAME
python3 -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install -q --require-hashes --no-deps -r "$LOCK"
"$VENV/bin/python" -m pip check
touch "$VENV/.installed"
