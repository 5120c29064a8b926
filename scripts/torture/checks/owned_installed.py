"""What an account owns is installed on each of its homes, and nothing else is: owned by the
product's rules (rules/coverage.py: a book or issue bought or redeemed, every issue a standing
subscription period or a billing grace window covers), as the server's rows say."""

INVARIANTS = ("lost", "mismatched")


def check(facts, flag):
    for name, home in facts.homes.items():
        should = facts.owned.get(home.account, set())
        for product in sorted(should - set(home.library)):
            flag("lost", f"home {name}: {product} is owned but not installed", name, product)
        for product in sorted((set(home.library) | home.library_folders()) - should):
            flag("mismatched", f"home {name}: {product} is installed but not owned (never bought, refunded or revoked)", name, product)
