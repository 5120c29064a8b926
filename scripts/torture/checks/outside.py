"""Nothing is written outside a home: only the expected folders in the fence, in each home only what
a home holds (manifests/ holds each installed product's manifest, <product id>.json, the base of its
next update by entries), and no link in a book points out of it."""

INVARIANTS = ("outside",)

FENCE = {"store", "server-data", "homes", "disk"}
HOME = {"kiosk.sqlite", "kiosk.sqlite-wal", "kiosk.sqlite-shm", "account.lock", "agent.lock", ".kiosk-reserve", "downloads", "Library", "manifests"}


def check(facts, flag):
    homes = facts.world.homes
    for entry in facts.fence_entries:
        if entry.name not in FENCE:
            flag("outside", f"{entry} was written outside every home")
    for entry in facts.home_parents_entries:
        if entry.name not in homes or homes[entry.name] != entry:
            flag("outside", f"{entry} was written outside every home")
    for name, home in facts.homes.items():
        for entry in home.entries():
            if entry not in HOME:
                flag("outside", f"home {name}: {entry} is not a home's file", name)
        for entry, plain in home.manifest_entries():
            if not entry.endswith(".json") or not plain:
                flag("outside", f"home {name}: manifests/{entry} is not a product's manifest", name)
        for path, target in home.links_out():
            flag("outside", f"home {name}: {path} points outside its book ({target})", name)
