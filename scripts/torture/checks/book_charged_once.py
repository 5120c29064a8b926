"""A book is charged once per account, unless the earlier charge was revoked first (in the order of
the charges: an Ask to Buy is charged when approved, not when asked). From the server's rows."""
from collections import defaultdict

INVARIANTS = ("duplicated",)


def check(facts, flag):
    server = facts.server
    charged_at = {e["transactionId"]: e["createdAt"] for e in server.ledger if e["kind"] == "charge"}
    paid = defaultdict(list)
    for t in server.transactions:
        if t["kind"] == "nonConsumable" and server.charges.get(t["id"]):
            paid[(t["accountId"], t["productId"])].append(t)
    for (account, product), rows in paid.items():
        rows.sort(key=lambda t: charged_at[t["id"]])
        for earlier, later in zip(rows, rows[1:]):
            if earlier["revokedAt"] is None or earlier["revokedAt"] > charged_at[later["id"]]:
                flag("duplicated", f"{product} charged twice to account {account}: {earlier['id']} and {later['id']}", product=product)
