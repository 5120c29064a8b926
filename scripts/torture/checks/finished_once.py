"""Every charged or redeemed transaction is finished, exactly once, on the home that made it (found
by its idempotency key), and reported finished to the server. Renewals are made by the store's
worker on no home, and a channel's grants (the web shop's, Google Play's) by the channel: no home
made them, and taken_in_everywhere.py follows them to every device."""
from collections import defaultdict

INVARIANTS = ("lost", "duplicated", "mismatched")
# The payment methods of a channel's grants.
CHANNEL_METHODS = ("stripe", "play", "appstore")


def check(facts, flag):
    keys = defaultdict(list)
    for name, home in facts.homes.items():
        for row in home.payments:
            if row["idempotencyKey"]:
                keys[(home.account, row["idempotencyKey"])].append((name, row))
    for t in facts.server.transactions:
        made = keys.get((t["accountId"], t["idempotencyKey"]), [])
        if t["status"] not in ("purchased", "revoked") or t["paymentMethod"] == "owned" and not made:
            continue
        # A code's grant is the store's (keyed by the code and the account), taken in by a restore.
        if t["paymentMethod"] in ("renewal", "code") + CHANNEL_METHODS:
            continue
        if not made:
            flag("lost", f"transaction {t['id']} ({t['productId']}, {t['status']}) is on the server but on no home", product=t["productId"])
            continue
        if len(made) > 1:
            flag("duplicated", f"transaction {t['id']} is on {len(made)} payment rows", made[0][0], t["productId"])
        for home, row in made:
            expected = "revoked" if t["status"] == "revoked" else "finished"
            if row["state"] != expected:
                flag("lost", f"transaction {t['id']} ({t['productId']}) is {t['status']} on the server but {row['state']} on home {home} ({row['lastError']})", home, t["productId"])
            elif row["transactionId"] != t["id"]:
                flag("mismatched", f"home {home} finished {row['transactionId']} for the key of {t['id']}", home, t["productId"])
            if t["finishedAt"] is None and t["status"] == "purchased":
                flag("lost", f"transaction {t['id']} ({t['productId']}) was never reported finished to the server", home, t["productId"])
