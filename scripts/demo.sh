#!/usr/bin/env bash
# `make demo`: run agentd on its embedded demo config (two static routes) in
# a private temp dir with its own socket, show what agentctl sees, stop it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN_DIR=${BIN_DIR:-target/debug}
AGENTD="$BIN_DIR/agentd"
AGENTCTL="$BIN_DIR/agentctl"
for b in "$AGENTD" "$AGENTCTL"; do
  [[ -x $b ]] || { echo "demo: $b not built (run: cargo build -p agentd --bins)" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agentd-demo.XXXXXX")
SOCK="$WORK/agentd.sock"
LOG="$WORK/agentd.log"
PID=""
cleanup() {
  if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "== starting agentd on the embedded demo config (socket $SOCK)"
"$AGENTD" --demo -f --socket "$SOCK" 2>"$LOG" &
PID=$!

# Readiness: poll until agentd answers, bounded (about 10 s at most).
ready=0
for _ in $(seq 1 200); do
  if "$AGENTCTL" --socket "$SOCK" status >/dev/null 2>&1; then ready=1; break; fi
  if ! kill -0 "$PID" 2>/dev/null; then break; fi
  sleep 0.05
done
if [[ $ready -ne 1 ]]; then
  echo "demo: agentd did not become ready; its log:" >&2
  cat "$LOG" >&2
  exit 1
fi

run() { echo; echo "\$ agentctl $*"; "$AGENTCTL" --socket "$SOCK" "$@"; }
run status
run routes
# The demo routes belong to tenant "lab" (agent://lab/...).
run lookup demo.echo --tenant lab --explain
run --json lookup demo.echo --tenant lab --explain
# Another tenant sees no eligible route, and says why.
run lookup demo.echo --tenant guest --explain
echo
echo "== agentd log"
cat "$LOG"
