"""A channel's payment is granted once, to one account: one web shop session or one Play purchase
token is one transaction, whichever number of times, in whatever order and by however many accounts
it was delivered or presented. From the server's rows (the grant's key is the channel's payment)."""
from collections import defaultdict

INVARIANTS = ("duplicated",)


def check(facts, flag):
    granted = defaultdict(list)
    for t in facts.server.transactions:
        key = t["idempotencyKey"] or ""
        if key.startswith(("stripe:", "play:", "appstore:")):
            granted[key].append(t)
    for key, rows in granted.items():
        if len(rows) > 1:
            accounts = sorted({t["accountId"] for t in rows})
            flag("duplicated", f"channel payment {key} granted {len(rows)} times, to {', '.join(accounts)}", product=rows[0]["productId"])
