"""Every charge is for a transaction and is taken once; a refund is given once, and only for what
was charged (or, for a book bought with credits, refunded in credits: no charge, a 0-cent refund
entry). From the server's ledger."""

INVARIANTS = ("duplicated",)


def check(facts, flag):
    server = facts.server
    for id, count in server.charges.items():
        if id not in server.by_id:
            flag("duplicated", f"charge for {id}, which is no transaction")
        if count > 1:
            flag("duplicated", f"transaction {id} charged {count} times", product=server.by_id.get(id, {}).get("productId"))
    for id, count in server.refunds.items():
        in_credits = server.by_id.get(id, {}).get("creditsSpent", 0) > 0
        if count > 1 or (id not in server.charges and not in_credits):
            flag("duplicated", f"transaction {id} refunded {count} times against {server.charges.get(id, 0)} charges")
