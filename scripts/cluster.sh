#!/usr/bin/env bash
# `make cluster`: the scale-out topology on one machine, end to end, then torn down.
#
#   client ──► nginx (deploy/nginx.conf) ──► kiosk serve A ─┐
#                 │                     └──► kiosk serve B ─┴─► PostgreSQL (scripts/postgres-cluster, a temp folder)
#                 └── archives from the folder `kiosk publish` made (X-Accel-Redirect)
#
# A reader syncs, buys and downloads through nginx; an Ask to Buy made through nginx is approved
# on instance B directly; a second device restores. Exits 0 only if every step did what it should.
set -euo pipefail
cd "$(dirname "$0")/.."
KIOSK=${KIOSK:-.build/release/kiosk}
KIOSK=$(realpath "$KIOSK")

work=$(mktemp -d /tmp/kiosk-cluster-XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    # PostgreSQL by its PID, through the launcher that started it (waits until it has stopped).
    scripts/postgres-cluster stop "$work/pg" || true
    rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
fail() { echo "cluster failed: $*" >&2; for log in "$work"/*.log; do echo "--- $log" >&2; tail -n 20 "$log" >&2; done; exit 1; }
expect() { grep -q -- "$1" "$2" || fail "$3 (expected \"$1\" in the output above)"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

BOOK=com.kiosk.books.river-of-maps
OTHER_BOOK=com.kiosk.books.lighthouse-keeper
# However many products the bundled catalog has today (a count written here rotted once).
products=$(python3 -c 'import glob, json; print(sum(len(json.load(open(f))["products"]) for f in glob.glob("Catalog/*.json")))')

step "PostgreSQL: initdb into $work/pg and start it on a free port (scripts/postgres-cluster)"
# The one PostgreSQL launcher (the tests, the fault suite and the bench use it too): as the postgres
# user when root, a database named kiosk; its watchdog stops the server if this script is killed.
# It prints port=… pid=… bin=…, and says what to install when PostgreSQL is missing.
cluster=$(scripts/postgres-cluster start "$work/pg" --watch $$ --keep --database kiosk) || fail "PostgreSQL did not start (see above)"
pg_port=$(printf '%s\n' "$cluster" | sed -n 's/.*port=\([0-9]*\).*/\1/p')
bin=$(printf '%s\n' "$cluster" | sed -n 's/.*bin=\([^ ]*\).*/\1/p')
[ -n "$pg_port" ] && [ -x "$bin/psql" ] || fail "scripts/postgres-cluster printed no port and bin: $cluster"
database="postgres://kiosk@127.0.0.1:$pg_port/kiosk?tlsmode=disable"
echo "database: postgres://kiosk@127.0.0.1:$pg_port/kiosk"

step "kiosk publish: the store packed once into $work/published"
"$KIOSK" publish --catalog Catalog --content Content --out "$work/published" | tee "$work/out"
expect "published $products products" "$work/out" "publish did not pack the $products products"

# Starts an instance and sets $listening to its URL (not in a subshell: its PID must be kept).
start_instance() {
    local name=$1
    "$KIOSK" serve --published "$work/published" --database "$database" --data "$work/data" \
        --port 0 --content-delivery x-accel >"$work/$name.out" 2>"$work/$name.log" &
    pids+=($!)
    for _ in $(seq 1 300); do
        grep -q '^listening on ' "$work/$name.out" 2>/dev/null && break
        sleep 0.1
    done
    listening=$(sed -n 's/^listening on //p' "$work/$name.out")
    [ -n "$listening" ] || fail "instance $name did not start"
}
step "Two kiosk serve instances over the one database (one data folder: one admin token)"
start_instance a; url_a=$listening
start_instance b; url_b=$listening
echo "A: $url_a  B: $url_b"

step "nginx with deploy/nginx.conf in front of both (ports and folders substituted)"
nginx_port=$(free_port)
mkdir -p "$work/nginx"
sed -e "s|^user www-data;.*|$( [ "$(id -u)" = 0 ] && echo 'user root;' )|" \
    -e "s|^pid /run/kiosk-nginx.pid;|daemon off;\npid $work/nginx/nginx.pid;|" \
    -e "s|/var/log/nginx/|$work/nginx/|" -e "s|/var/lib/nginx/|$work/nginx/|" \
    -e "s|listen 8080;|listen 127.0.0.1:$nginx_port;|" \
    -e "s|server 127.0.0.1:8081 |server ${url_a#http://} |" -e "s|server 127.0.0.1:8082 |server ${url_b#http://} |" \
    -e "s|/srv/kiosk/published/|$work/published/|" \
    deploy/nginx.conf >"$work/nginx/nginx.conf"
/usr/sbin/nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -e "$work/nginx.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$nginx_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$nginx_port/healthz" >/dev/null || fail "nginx did not start"
url="http://127.0.0.1:$nginx_port"
echo "nginx: $url"

export KIOSK_HOME="$work/reader"
step "sync, buy and download through nginx (the bytes come from nginx itself)"
"$KIOSK" sync --server "$url" | tee "$work/out"
expect "$products added" "$work/out" "the first sync did not add the $products products"
"$KIOSK" buy "$BOOK" | tee "$work/out"
expect "installed $BOOK" "$work/out" "the book was not installed"
grep -q '"GET /v1/content/' "$work/nginx/kiosk-access.log" || fail "the download did not go through nginx"

step "Ask to Buy through nginx, approved on instance B directly"
"$KIOSK" buy "$OTHER_BOOK" --payment defer | tee "$work/out"
expect "waiting for approval" "$work/out" "the purchase was not deferred"
transaction=$(sed -n 's/^transaction \(txn_[0-9a-f]*\):.*/\1/p' "$work/out")
"$KIOSK" admin approve "$transaction" --server "$url_b" --data "$work/data" | tee "$work/out" || fail "instance B could not approve $transaction"
"$KIOSK" resume | tee "$work/out"
expect "installed $OTHER_BOOK" "$work/out" "the approved book was not installed"

step "A second device signs in and restores through nginx"
echo "correct horse battery" | "$KIOSK" account create --email cluster@example.com --password-stdin --name "first device" | tee "$work/out"
expect "signs in with cluster@example.com" "$work/out" "the account did not gain a sign-in"
first_home="$KIOSK_HOME"
export KIOSK_HOME="$work/second-device"
echo "correct horse battery" | "$KIOSK" login --email cluster@example.com --password-stdin --name "second device" --server "$url" | tee "$work/out"
expect "signed in to account" "$work/out" "the second device did not sign in through nginx"
"$KIOSK" restore | tee "$work/out"
expect "installed $BOOK" "$work/out" "restore did not install the book"
expect "installed $OTHER_BOOK" "$work/out" "restore did not install the approved book"

step "Removed on instance B, the second device is refused through nginx at once (both instances)"
KIOSK_HOME="$first_home" "$KIOSK" devices remove "second device" --server "$url_b" | tee "$work/out"
expect "it is signed out" "$work/out" "instance B did not remove the second device"
for attempt in 1 2 3 4; do
    if "$KIOSK" devices > "$work/out" 2>&1; then fail "the removed device was let in through nginx (attempt $attempt)"; fi
    expect "401" "$work/out" "the removed device was not refused with 401"
done
echo "refused on every attempt through nginx, whichever instance answered"

step "Instance A and B agree: one ledger in PostgreSQL"
charges=$("$bin/psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U kiosk -d kiosk -c "SELECT COUNT(*) FROM \"ledgerEntry\" WHERE kind = 'charge'")
[ "$charges" = 2 ] || fail "expected 2 charges in the shared ledger, found $charges"
echo "2 charges, one ledger"

step "Stopping both instances, nginx and PostgreSQL by PID, and removing the folder"
trap - EXIT
cleanup
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && fail "process $pid is still running"; done
[ ! -e "$work" ] || fail "$work was not removed"
echo "cluster complete: every step did what it should"
