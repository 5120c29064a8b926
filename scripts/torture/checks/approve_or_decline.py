"""Of an approval and a decline of one Ask to Buy released together, exactly one succeeds. From the
answers the driver recorded."""

INVARIANTS = ("mismatched",)


def check(facts, flag):
    for op in facts.world.ops:
        if op["kind"] != "race" or "race" not in op or op["argv"][0] != "approve-decline":
            continue
        variant, target, product = op["argv"]
        won = [action for action, status in op["race"].items() if isinstance(status, int) and 200 <= status < 300]
        if len(won) != 1:
            flag("mismatched", f"race {variant} on {target}: {' and '.join(won) or 'neither'} succeeded; exactly one may", op["home"], product)
