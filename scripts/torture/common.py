"""What every part of the fault suite shares: the products the history plays with, the fault kinds
of the update scenarios, the clocks and leases the run sets, and two small helpers."""
import json, os, urllib.error, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MIB = 1 << 20

BOOKS = ["com.kiosk.books.lighthouse-keeper", "com.kiosk.books.river-of-maps", "com.kiosk.books.small-engines"]
ISSUES = [f"com.kiosk.magazines.harbor-monthly.issue-0{n}" for n in (1, 2, 3)]
SUBSCRIPTION = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
HARBOR = "com.kiosk.magazines.harbor-monthly"
# A second plan of the subscription's group, a level above it: the history moves between the two.
PREMIUM = "com.kiosk.magazines.harbor-monthly.subscription.premium"
PACKS = {"com.kiosk.credits.pack-5": 5, "com.kiosk.credits.pack-10": 10}
# Large books added to the bundled store so that faults land mid-transfer.
LARGE = ["com.kiosk.books.atlas-north", "com.kiosk.books.atlas-south"]
# Zip products of many small entries that get new versions published during the history (two entries
# changed, one removed, one added each time): installed products are updated by entries, under
# faults aimed at the update (see updates.update_op).
UPDATES = ["com.kiosk.books.field-notes", "com.kiosk.books.tide-tables"]
# Publication files (an EPUB of chapters and stored "plates", made by scripts/make_epub.py) that get
# new editions during the history (another chapter revised, now and then a new printing): installed
# as the file itself, updated by content-defined chunks (the store's manifest lists the chunks, the
# device copies those its installed file holds and fetches the rest by ranges). Half the update
# scenarios aim at them.
FILE_UPDATES = ["com.kiosk.books.harbor-plates"]
# The EPUB's shape: chapters of text (deflated, ~20 KiB each) then plates of random bytes (stored),
# about 1.4 MiB in ~70 chunks.
EPUB_SHAPE = {"chapters": 10, "chapter_bytes": 120000, "plates": 20, "plate_bytes": 60000}
# What each update scenario does to the update in flight, taken in turn (shuffled each round).
# disk-full is aimed at home b's update (its tmpfs) and is left out of a run without one.
UPDATE_FAULTS = ["client-kill", "cut-range", "server-kill", "replace", "hand-edit", "takeover", "stall", "disk-full"]
# The sandbox's clock during the history: a 30-day month in a minute, so subscriptions renew
# several times while the history runs (the store's own worker charges them).
TIME_SCALE = 43200
# Home a2 takes no command that would deliver for it: `kiosk agent` alone brings it what the
# account gets elsewhere (a's purchases, renewals, approvals) and takes away what is revoked.
AGENT_HOME = "a2"

# Seconds a client's download claim lasts without renewal (the client's default is 15): short, so
# that a suspended owner's claim lapses within the client-stop fault.
CLAIM_LEASE = 2


def log(line):
    print(line, flush=True)


def http(url, method, token, body=None, timeout=30):
    """One request with a bearer token: (status, decoded JSON answer or None); a request that got
    no answer at all gives its error as the status."""
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, None
    except (urllib.error.URLError, OSError) as error:
        return f"no answer ({error})", None


def free_disk(path):
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize
