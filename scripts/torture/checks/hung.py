"""Every command ends: one that ran over its time (4 minutes) was killed by the driver."""

INVARIANTS = ("hung",)


def check(facts, flag):
    for op in facts.world.ops:
        if op.get("hung"):
            flag("hung", f"op {op['index']} (kiosk {' '.join(op['argv'])} on {op['home']}) ran over its time and was killed", op["home"])
