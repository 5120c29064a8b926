"""A credit balance is what was bought minus what was spent: from the server's transactions (a
refund takes back what a purchase granted and gives back what it spent; a revocation alone changes
no balance), and from the rows of the account's homes."""
from ..common import PACKS
from ..rules import states

INVARIANTS = ("mismatched",)


def check(facts, flag):
    server = facts.server
    refunded = set(server.refunds)
    # A redemption of something the account already owned is answered with a free re-download.
    free = {t["id"] for t in server.transactions if t["paymentMethod"] == "owned"}
    for account, balance in server.balances.items():
        standing = [t for t in server.transactions if t["accountId"] == account and t["status"] in ("purchased", "revoked") and t["id"] not in refunded]
        expected = sum(t["creditsGranted"] for t in standing) - sum(t["creditsSpent"] for t in standing)
        if balance != expected:
            flag("mismatched", f"account {account} has {balance} credits; its transactions granted minus spent come to {expected}")
        homes = [home for home in facts.homes.values() if home.account == account]
        bought = spent = 0
        for home in homes:
            for row in home.payments:
                # Every row the server may have charged: an unfinished one is reported as lost elsewhere.
                if row["state"] not in states.MAY_BE_CHARGED or not row["idempotencyKey"] or row["transactionId"] in refunded:
                    continue
                if row["productId"] in PACKS:
                    bought += PACKS[row["productId"]] * row["quantity"]
                elif row["paymentMethod"] == "credits" and row["transactionId"] not in free:
                    spent += facts.world.catalog[row["productId"]].get("creditPrice", 0)
        # Credits a channel granted (a pack paid on the web shop or in Play) were bought on no home.
        bought += sum(t["creditsGranted"] for t in standing if t["paymentMethod"] in ("stripe", "play", "appstore"))
        if homes and bought - spent != balance:
            flag("mismatched", f"account {account}: its homes bought {bought} credits and spent {spent}, the server holds {balance}")
