"""Every device of an account holds every transaction of it that stands (rules/taken_in.py),
finished, whichever device bought it and whether or not the store made it (a renewal): the agent's
home without running a command, the others after their restore and resume."""
from ..rules.taken_in import taken_in

INVARIANTS = ("lost",)


def check(facts, flag):
    for name, home in facts.homes.items():
        rows = home.payments
        held = {r["transactionId"]: r for r in rows if r["transactionId"]}
        for t in facts.server.transactions:
            if t["accountId"] != home.account or not taken_in(t):
                continue
            row = held.get(t["id"])
            if row is None:
                # One device's row for a book may be another purchase of it that it holds (a
                # restore keeps the first it met); a subscription period is always its own.
                if t["kind"] == "nonConsumable" and any(r["productId"] == t["productId"] and r["state"] == "finished" for r in rows):
                    continue
                flag("lost", f"home {name} never took in {t['id']} ({t['productId']}, {t['paymentMethod']})", name, t["productId"])
            elif row["state"] != "finished":
                flag("lost", f"home {name} holds {t['id']} ({t['productId']}) as {row['state']} ({row['lastError']})", name, t["productId"])
