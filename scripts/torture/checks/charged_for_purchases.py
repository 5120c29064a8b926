"""Money is taken only for what was bought (a declined request or a failed payment is free), and
every paid purchase has its charge. From the server's transactions and ledger."""

INVARIANTS = ("mismatched", "lost")


def check(facts, flag):
    server = facts.server
    for id in server.charges:
        t = server.by_id.get(id)
        if t and t["status"] not in ("purchased", "revoked"):
            flag("mismatched", f"transaction {id} ({t['productId']}) is {t['status']} but was charged", product=t["productId"])
    for t in server.transactions:
        if t["status"] in ("purchased", "revoked") and t["amountCents"] > 0 and t["paymentMethod"] != "owned" and server.charges.get(t["id"], 0) == 0:
            flag("lost", f"transaction {t['id']} ({t['productId']}) was paid for but has no charge in the ledger", product=t["productId"])
