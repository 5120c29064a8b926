#!/usr/bin/env bash
# The main job end to end: a server over the bundled store, a client driven through it.
# Exits 0 only if every step did what it should.
set -euo pipefail
cd "$(dirname "$0")/.."
KIOSK=${KIOSK:-.build/release/kiosk}

work=$(mktemp -d)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() { echo "demo failed: $*" >&2; exit 1; }

step "Starting kiosk serve on a free port over Catalog/ and Content/"
"$KIOSK" serve --catalog Catalog --content Content --data "$work/server" --port 0 \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 300); do
    grep -q '^listening on ' "$work/server.out" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; fail "the server did not start"; }
    sleep 0.1
done
url=$(sed -n 's/^listening on //p' "$work/server.out")
[ -n "$url" ] || fail "the server never said where it listens"
echo "server: $url"

export KIOSK_HOME="$work/reader"
step "kiosk sync (first time: everything is new)"
"$KIOSK" sync --server "$url" | tee "$work/sync1"
grep -q 'added' "$work/sync1" || fail "the first sync added nothing"

step "kiosk sync (again: the server answers 304)"
"$KIOSK" sync | tee "$work/sync2"
grep -qx 'catalog unchanged' "$work/sync2" || fail "the second sync was not 'catalog unchanged'"

step "kiosk products"
"$KIOSK" products | tee "$work/products"
grep -q 'com.kiosk.books.lighthouse-keeper' "$work/products" || fail "the books are not listed"

step "Stopping the server"
kill -TERM "$server_pid"
wait "$server_pid" || fail "the server did not stop cleanly"
server_pid=""
echo "demo complete: every step did what it should"
