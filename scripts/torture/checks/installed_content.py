"""An owned, installed product's tree is the content the publisher's files hold for it now (every
path, kind and file's SHA-256): after quiescence every home has the latest version."""

INVARIANTS = ("mismatched",)


def check(facts, flag):
    for name, home in facts.homes.items():
        should = facts.owned.get(home.account, set())
        for product in sorted(set(home.library) & should):
            if home.installed_tree(product) != facts.content_tree(product):
                flag("mismatched", f"home {name}: {product} differs from the content the server publishes", name, product)
