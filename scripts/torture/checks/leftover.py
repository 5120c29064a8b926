"""Nothing is left behind once every home has settled: no partial file in downloads/, no staging
folder in Library/, no download holding a lease or not installed."""

INVARIANTS = ("leftover",)


def check(facts, flag):
    for name, home in facts.homes.items():
        for partial in home.partial_files():
            flag("leftover", f"home {name}: {partial} left in downloads/", name)
        for staging in home.staging_folders():
            flag("leftover", f"home {name}: {staging} left in Library/", name)
        for row in home.downloads:
            if row["owner"] or row["leaseUntil"]:
                flag("leftover", f"home {name}: the download of {row['productId']} still holds a lease ({row['owner']})", name, row["productId"])
            if row["state"] != "installed":
                flag("leftover", f"home {name}: the download of {row['productId']} is left {row['state']} ({row['lastError']})", name, row["productId"])
