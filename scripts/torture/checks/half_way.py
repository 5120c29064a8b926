"""Nothing is left half-way on any home once it has settled (a purchase not sent, not delivered, not
finished, an Ask to Buy never answered), and nothing finished is without its receipt."""
from ..rules import states

INVARIANTS = ("lost",)


def check(facts, flag):
    for name, home in facts.homes.items():
        for row in home.payments:
            if row["state"] in states.HALF_WAY:
                flag("lost", f"home {name}: {row['productId']} left {row['state']} ({row['lastError']})", name, row["productId"])
            if row["state"] == "finished" and row["kind"] != "consumable" and not row["receipt"]:
                flag("lost", f"home {name}: {row['productId']} ({row['transactionId']}) is finished without its receipt", name, row["productId"])
