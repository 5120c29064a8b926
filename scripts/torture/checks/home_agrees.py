"""A home believes nothing the server does not: each transaction it holds is on one row, and one it
holds finished, revoked or restored is one the server has, standing when finished, revoked when
revoked."""
from collections import Counter

INVARIANTS = ("duplicated", "mismatched")


def check(facts, flag):
    by_id = facts.server.by_id
    for name, home in facts.homes.items():
        seen = Counter(r["transactionId"] for r in home.payments if r["transactionId"])
        for id, count in seen.items():
            if count > 1:
                flag("duplicated", f"home {name} holds transaction {id} {count} times", name)
        for row in home.payments:
            if row["state"] in ("finished", "revoked", "restored"):
                server = by_id.get(row["transactionId"])
                if server is None or server["status"] not in ("purchased", "revoked") or (row["state"] == "finished") != (server["status"] == "purchased"):
                    flag("mismatched", f"home {name}: {row['productId']} is {row['state']} as {row['transactionId']}, the server says {server and server['status']}", name, row["productId"])
