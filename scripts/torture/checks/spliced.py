"""Every installed tree in every home is, byte for byte, the published archive of the version the
home's library names (unpacked with Python's zipfile or tarfile, published.py): a tree equal to no
published version, or spliced from several, is `spliced`; so is every such tree the history's own
checks (before and after each update scenario, updates.check_installed) found."""

INVARIANTS = ("spliced",)


def check(facts, flag):
    world = facts.world
    for message, home, product in world.tree_failures:
        flag("spliced", message, home, product)
    for name, home in facts.homes.items():
        for product, item in home.library.items():
            world.trees_checked["final"] += 1
            problem = world.published.compare(home.installed_tree(product), product, item["sha256"], world.versions[product], world.server_data / "content")
            if problem:
                flag("spliced", f"home {name}: {product} {problem} (after quiescence)", name, product)
