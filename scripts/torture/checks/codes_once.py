"""An offer code gives its product at most as many times as its limit, once per account, and
the count the store keeps of its redemptions is the number of its grants: a code is never spent
without its grant, nor granted without being spent, whatever faults fell between. From the
server's rows (a code's grant is keyed `code:<code>:<account>`)."""
from collections import defaultdict

INVARIANTS = ("duplicated", "mismatched")


def check(facts, flag):
    grants = defaultdict(list)
    for t in facts.server.transactions:
        key = t["idempotencyKey"] or ""
        if key.startswith("code:") and t["paymentMethod"] == "code":
            grants[key.split(":")[1]].append(t)
    for code in facts.server.codes:
        rows = grants.get(code["id"], [])
        accounts = [t["accountId"] for t in rows]
        if len(rows) > code["redemptionLimit"]:
            flag("duplicated", f"code {code['id']} granted {len(rows)} times, over its limit of {code['redemptionLimit']}", product=rows[0]["productId"])
        if len(set(accounts)) < len(accounts):
            flag("duplicated", f"code {code['id']} granted twice to one account", product=rows[0]["productId"])
        if len(rows) != code["redeemed"]:
            flag("mismatched", f"code {code['id']} counts {code['redeemed']} redemptions but made {len(rows)} grants", product=rows[0]["productId"] if rows else None)
