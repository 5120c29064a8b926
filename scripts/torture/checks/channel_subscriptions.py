"""A subscription a channel renews holds one standing period per payment its channel made, and
follows the channel's own word (issue 63). From the server's rows and the history's record of what
each channel was told (world.channel_subs, channel_subscriptions.py):
- Stripe: every invoice the store answered 200 is a period (its key `stripe:in_…`, or the
  subscription's own `stripe:sub_…` for the first), and no period has a key the history never
  sent; a period is standing unless its invoice was refunded; a subscription not ended runs to the
  latest standing period's end.
- Play: a subscription whose last notification the store answered 200 (or none was sent) runs to
  the expiry the stand-in gave then, with the auto-renew it said; its periods' keys are unique
  (checks/channel_once.py)."""
from collections import defaultdict

from .. import channel_subscriptions as history

INVARIANTS = ("lost", "duplicated", "mismatched")


def check(facts, flag):
    told = getattr(facts.world, "channel_subs", {})
    rows = {(r["channel"], r["channelSubscriptionId"]): r for r in facts.server.channel_subscriptions}
    periods = defaultdict(list)
    for t in facts.server.transactions:
        if t["kind"] == "subscription" and t["paymentMethod"] in ("stripe", "play"):
            periods[t["originalTransactionId"]].append(t)
    for s in told.values():
        if s["channel"] == "web":
            check_stripe(s, rows, periods, facts, flag)
        else:
            check_play(s, rows, periods, flag)


def check_stripe(s, rows, periods, facts, flag):
    first = next((t for t in facts.server.transactions if t["idempotencyKey"] == f"stripe:{s['id']}"), None)
    if first is None:
        if any(s["payments"].values()):
            flag("lost", f"Stripe subscription {s['id']}: its first payment was answered 200 and nothing was granted", product=history.SUBSCRIPTION)
        return
    row = rows.get(("stripe", s["id"]))
    if first["paymentMethod"] == "owned":
        # Paid while the account's subscription ran already: a free re-buy for the operator to
        # refund; Stripe's later invoices grant nothing more.
        if row is not None:
            flag("mismatched", f"Stripe subscription {s['id']} was a free re-buy and yet took over a subscription row", product=history.SUBSCRIPTION)
        return
    if row is None:
        # A later purchase of the plan made elsewhere (the sandbox's, Play's) restarted the row:
        # the store no longer follows this subscription, and its renewals are the operator's.
        later = [t for t in facts.server.transactions if t["originalTransactionId"] == first["originalTransactionId"]
                 and t["sequence"] > first["sequence"] and not (t["idempotencyKey"] or "").startswith("stripe:")]
        if not later:
            flag("lost", f"Stripe subscription {s['id']} was granted and its row is not Stripe's", product=history.SUBSCRIPTION)
        return
    keys = [t["idempotencyKey"] for t in periods.get(row["originalTransactionId"], []) if t["idempotencyKey"].startswith("stripe:")]
    for key, answered in s["payments"].items():
        if answered and keys.count(key) == 0:
            flag("lost", f"Stripe subscription {s['id']}: payment {key} was answered 200 and holds no period", product=history.SUBSCRIPTION)
    for key in set(keys):
        if keys.count(key) > 1:
            flag("duplicated", f"Stripe subscription {s['id']}: payment {key} holds {keys.count(key)} periods", product=history.SUBSCRIPTION)
        if key not in s["payments"]:
            flag("mismatched", f"Stripe subscription {s['id']}: a period keyed {key}, which the history never sent", product=history.SUBSCRIPTION)
    standing = [t for t in periods.get(row["originalTransactionId"], []) if t["status"] == "purchased"]
    if row["state"] != "expired" and standing:
        latest = max(history.seconds(t["expiresDate"]) for t in standing)
        if abs(history.seconds(row["expiresDate"]) - latest) > 1:
            flag("mismatched", f"Stripe subscription {s['id']} runs to {row['expiresDate']}, its latest standing period to {latest}",
                 product=history.SUBSCRIPTION)
    if s["ended"] and row["state"] != "expired" and s.get("end_answered"):
        flag("mismatched", f"Stripe subscription {s['id']} was deleted on Stripe and is {row['state']}", product=history.SUBSCRIPTION)


def check_play(s, rows, periods, flag):
    row = rows.get(("play", history.stores_reference(s["id"])))
    if row is None:
        return  # never presented with a 200 (the purchase's own checks judge a presentation)
    delivered = s.get("delivered", set())
    last = list(s["notified"])[-1:] if s["notified"] else []
    if last and last[0] not in delivered:
        return  # its last word never reached the store: nothing to hold it to
    expiry, renewing = s["notified"][last[0]] if last else (s["expiry"], s["autoRenew"])
    if row["state"] != "expired":
        if abs(history.seconds(row["expiresDate"]) - expiry) > 1:
            flag("mismatched", f"Play subscription {s['id']} runs to {row['expiresDate']}, Play says {expiry}", product=history.SUBSCRIPTION)
        if bool(row["autoRenew"]) != renewing:
            flag("mismatched", f"Play subscription {s['id']} has auto-renew {bool(row['autoRenew'])}, Play says {renewing}", product=history.SUBSCRIPTION)
