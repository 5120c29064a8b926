"""Each action of a race is answered a success or a 409 (the loser's legitimate answer), nothing
else. From the answers the driver recorded."""

INVARIANTS = ("errored",)


def check(facts, flag):
    for op in facts.world.ops:
        if op["kind"] != "race" or "race" not in op:
            continue
        variant, target, product = op["argv"]
        for action, status in op["race"].items():
            if isinstance(status, str) and status.startswith("op "):
                continue
            if not (isinstance(status, int) and (200 <= status < 300 or status == 409)):
                flag("errored", f"race {variant} on {target}: {action} answered {status}, neither a success nor 409", op["home"], product)
