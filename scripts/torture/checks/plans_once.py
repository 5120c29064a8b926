"""One plan of a group runs per account, whatever the races (issue 65): no account has two
subscriptions of one group that have not ended. A change of plan at once credits the period it
leaves once, never more than that period was charged, and only for a change that made a new
period of the same subscription (keyed `plan:`). From the server's rows."""
from collections import defaultdict

INVARIANTS = ("duplicated", "mismatched")


def check(facts, flag):
    server = facts.server
    series = {id: p.get("subscriptionGroup") or p.get("series") for id, p in facts.world.catalog.items()}
    running = defaultdict(list)
    for s in server.subscriptions:
        if s["state"] != "expired":
            running[(s["accountId"], series.get(s["productId"]))].append(s)
    for (account, group), subs in running.items():
        if len(subs) > 1:
            flag("duplicated", f"account {account} has {len(subs)} plans of {group} running: {', '.join(s['productId'] for s in subs)}",
                 product=subs[0]["productId"])
    credits = defaultdict(list)
    for e in server.ledger:
        if e["kind"] == "credit":
            credits[e["transactionId"]].append(e)
    charged = {e["transactionId"]: e["amountCents"] for e in server.ledger if e["kind"] == "charge"}
    changes = defaultdict(list)
    for t in server.transactions:
        if (t["idempotencyKey"] or "").startswith("plan:"):
            changes[t["originalTransactionId"]].append(t)
    for id, entries in credits.items():
        period = server.by_id.get(id)
        product = period["productId"] if period else None
        if len(entries) > 1:
            flag("duplicated", f"period {id} credited {len(entries)} times", product=product)
        if period is None or period["kind"] != "subscription":
            flag("mismatched", f"a credit on {id}, which is no subscription period", product=product)
            continue
        if -sum(e["amountCents"] for e in entries) > charged.get(id, 0):
            flag("mismatched", f"period {id} credited more than its charge of {charged.get(id, 0)}", product=product)
        if not any(c["sequence"] > period["sequence"] for c in changes.get(period["originalTransactionId"], [])):
            flag("mismatched", f"period {id} credited with no change of plan after it", product=product)
