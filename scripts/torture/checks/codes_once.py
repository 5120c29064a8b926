"""An offer code is spent at most as many times as its limit, once per account, and each spending
is one standing transaction: a code is never spent without its grant or purchase, nor granted or
used without being spent, whatever faults fell between. A code that gives its product free is
granted keyed `code:<code>:<account>`; one used when buying (a percentage or an amount off) is
spent by the purchase it was sent with, charged at its price. From the server's rows."""
from collections import defaultdict

INVARIANTS = ("duplicated", "mismatched")


def check(facts, flag):
    server = facts.server
    spent = defaultdict(list)
    for r in server.redemptions:
        spent[r["codeId"]].append(r)
    grants = defaultdict(list)
    for t in server.transactions:
        key = t["idempotencyKey"] or ""
        if key.startswith("code:") and t["paymentMethod"] == "code":
            grants[key.split(":")[1]].append(t)
    for code in server.codes:
        rows = spent.get(code["id"], [])
        accounts = [r["accountId"] for r in rows]
        product = None
        if rows and rows[0]["transactionId"] in server.by_id:
            product = server.by_id[rows[0]["transactionId"]]["productId"]
        if len(rows) > code["redemptionLimit"]:
            flag("duplicated", f"code {code['id']} spent {len(rows)} times, over its limit of {code['redemptionLimit']}", product=product)
        if len(set(accounts)) < len(accounts):
            flag("duplicated", f"code {code['id']} spent twice by one account", product=product)
        if len(rows) != code["redeemed"]:
            flag("mismatched", f"code {code['id']} counts {code['redeemed']} redemptions but was spent {len(rows)} times", product=product)
        for r in rows:
            if (r["transactionId"] or "").startswith("intent:"):
                # Reserved by a web checkout not paid (yet): no purchase to name.
                continue
            t = server.by_id.get(r["transactionId"])
            if t is None or t["status"] not in ("purchased", "revoked") or t["paymentMethod"] == "owned":
                flag("mismatched", f"code {code['id']} was spent by {r['accountId']} for {r['transactionId']}, which is no standing purchase", product=product)
        if code.get("benefit", "free") == "free" and len(grants.get(code["id"], [])) != len(rows):
            flag("mismatched", f"code {code['id']} made {len(grants.get(code['id'], []))} grants but was spent {len(rows)} times", product=product)
    # A purchase at a code's price spent a code.
    spent_for = {r["transactionId"] for r in server.redemptions}
    for t in server.transactions:
        if t.get("offerType") == "offerCode" and t["paymentMethod"] not in ("code", "owned") and t["id"] not in spent_for:
            flag("mismatched", f"transaction {t['id']} was sold at a code's price and spent no code", product=t["productId"])
