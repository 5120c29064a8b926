#!/usr/bin/env bash
# The main job end to end: a server over the bundled store, and a reader's client driven through
# sync, purchases, credits, Ask to Buy, downloads and a restore on a second device.
# Exits 0 only if every step did what it should.
set -euo pipefail
cd "$(dirname "$0")/.."
KIOSK=${KIOSK:-.build/release/kiosk}

# Kept after the demo (git ignores it) so the unpacked books can be opened.
work="$PWD/.demo"
rm -rf "$work"
mkdir -p "$work"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\033[1m'; plain=$'\033[0m'; else bold=""; plain=""; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
fail() { echo "demo failed: $*" >&2; exit 1; }
expect() { grep -q -- "$1" "$2" || fail "$3 (expected \"$1\" in the output above)"; }

BOOK=com.kiosk.books.river-of-maps
PACK=com.kiosk.credits.pack-5
ISSUE1=com.kiosk.magazines.harbor-monthly.issue-01
ISSUE2=com.kiosk.magazines.harbor-monthly.issue-02
OTHER_BOOK=com.kiosk.books.lighthouse-keeper
EPUB=com.kiosk.books.salt-and-stars

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
step "kiosk sync: the catalog arrives"
"$KIOSK" sync --server "$url" | tee "$work/out"
products=$(python3 -c 'import glob, json; print(sum(len(json.load(open(f))["products"]) for f in glob.glob("Catalog/*.json")))')
expect "$products added" "$work/out" "the first sync did not add the $products products"

step "kiosk products"
"$KIOSK" products | tee "$work/out"
expect "$BOOK" "$work/out" "the books are not listed"

step "kiosk buy $BOOK: receipt saved, then downloaded and installed"
"$KIOSK" buy "$BOOK" | tee "$work/out"
expect "installed $BOOK" "$work/out" "the book was not installed"

step "kiosk buy $PACK --quantity 2: 10 credits"
"$KIOSK" buy "$PACK" --quantity 2 | tee "$work/out"
expect "balance: 10 credits" "$work/out" "the balance is not 10 credits"

step "kiosk redeem $ISSUE2: an issue for 2 credits"
"$KIOSK" redeem "$ISSUE2" | tee "$work/out"
expect "installed $ISSUE2" "$work/out" "the redeemed issue was not installed"
"$KIOSK" balance | tee "$work/out"
expect "^8 credits" "$work/out" "the balance is not 8 credits after the redemption"

step "kiosk buy $ISSUE1 --no-download: finished now, downloaded later"
"$KIOSK" buy "$ISSUE1" --no-download | tee "$work/out"
expect "queued" "$work/out" "the issue's download was not queued"

step "Ask to Buy: kiosk buy $OTHER_BOOK --payment defer, then approved by the store's admin"
"$KIOSK" buy "$OTHER_BOOK" --payment defer | tee "$work/out"
expect "waiting for approval" "$work/out" "the purchase was not deferred"
transaction=$(sed -n 's/^transaction \(txn_[0-9a-f]*\):.*/\1/p' "$work/out")
curl -sf -X POST -H "Authorization: Bearer $(cat "$work/server/admin-token")" \
    "$url/v1/admin/transactions/$transaction/approve" >/dev/null || fail "the admin could not approve $transaction"
echo "approved $transaction"

step "kiosk resume: the approved book and the queued issue download"
"$KIOSK" resume | tee "$work/out"
expect "installed $OTHER_BOOK" "$work/out" "the approved book was not installed"
expect "installed $ISSUE1" "$work/out" "the queued issue was not installed"

step "kiosk buy $EPUB: an EPUB, installed as the publisher's file, which any reading app opens"
"$KIOSK" products --long "$EPUB" | tee "$work/out"
expect "Wren Calloway" "$work/out" "the EPUB's author (from its package document) is not shown"
"$KIOSK" buy "$EPUB" | tee "$work/out"
expect "installed $EPUB" "$work/out" "the EPUB was not installed"
epub_file=$("$KIOSK" open "$EPUB")
echo "kiosk open $EPUB: $epub_file"
[ "$(sha256sum < "$epub_file")" = "$(sha256sum < Content/publications/salt-and-stars.epub)" ] \
    || fail "the installed EPUB is not the publisher's file byte for byte"
curl -sf -H 'Accept: application/opds+json' "$url/opds" | python3 -c 'import json, sys; feed = json.load(sys.stdin); print("OPDS 2.0:", feed["metadata"]["title"], "-", len(feed["navigation"]), "feeds")' \
    || fail "the OPDS catalog a reading app reads did not answer"
# grep reads the whole feed (no -q): quitting at the match could cut curl off mid-write.
curl -sf "$url/opds" | grep '<feed xmlns="http://www.w3.org/2005/Atom"' >/dev/null \
    || fail "an app that names no format is not given OPDS 1.2"
[ "$(curl -s -o /dev/null -w '%{content_type}' "$url/v1/covers/$EPUB")" = "image/png" ] || fail "the EPUB's own cover is not served"

step "kiosk library"
"$KIOSK" library | tee "$work/out"
for id in "$BOOK" "$ISSUE1" "$ISSUE2" "$OTHER_BOOK" "$EPUB"; do
    expect "$id" "$work/out" "$id is missing from the library"
done
"$KIOSK" transactions | tee "$work/out"
if grep -qE "purchasing|delivering|deferred" "$work/out"; then fail "a transaction was left unfinished"; fi

step "A second device: the account gains a sign-in, the device signs in with its own token, then kiosk restore (no sync needed)"
echo "correct horse battery" | "$KIOSK" account create --email reader@example.com --password-stdin --name "first device" | tee "$work/out"
expect "signs in with reader@example.com" "$work/out" "the account did not gain a sign-in"
first_home="$KIOSK_HOME"
export KIOSK_HOME="$work/second-device"
echo "correct horse battery" | "$KIOSK" login --email reader@example.com --password-stdin --name "second device" --server "$url" | tee "$work/out"
expect "signed in to account" "$work/out" "the second device did not sign in"
"$KIOSK" devices | tee "$work/out"
expect "2 of at most 10 devices of reader@example.com" "$work/out" "the account does not list its two devices"
"$KIOSK" restore | tee "$work/out"
expect "restored 5 purchases" "$work/out" "the second device did not restore the 5 books and issues"
expect "installed $BOOK" "$work/out" "restore did not install the book"
if grep -q "$PACK" "$work/out"; then fail "credits were restored"; fi
"$KIOSK" library | tee "$work/out"
expect "$BOOK" "$work/out" "the restored book was not installed on the second device"

step "The first device signs the second out; the second is refused at once"
KIOSK_HOME="$first_home" "$KIOSK" devices remove "second device" | tee "$work/out"
expect "it is signed out" "$work/out" "the second device was not removed"
if "$KIOSK" devices > "$work/out" 2>&1; then fail "the removed device was still let in"; fi
cat "$work/out"
expect "401" "$work/out" "the removed device was not refused with 401"

step "Where the books are (kept after the demo)"
find "$work/reader/Library" -maxdepth 2 -not -name '.*' | sort

step "Stopping the server"
kill -TERM "$server_pid"
wait "$server_pid" || fail "the server did not stop cleanly"
server_pid=""
echo "demo complete: every step did what it should"
