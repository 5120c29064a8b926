"""No download starts over when it need not: a request for a version goes back no further than
where the previous request for it began (its bytes were kept), unless the reader cancelled it in
between or the store refunded or revoked something meanwhile (an operator, or a payment channel's
refund). From the proxy's requests."""
from collections import defaultdict

from ..proxy import resumed_downloads

INVARIANTS = ("restarted",)


def check(facts, flag):
    world = facts.world
    resets = defaultdict(list)   # (home, product) or None (any) → when bytes were legitimately dropped
    for op in world.ops:
        if op["kind"] == "cancel":
            resets[(op["home"], op["argv"][1])].append(op["start"])
        elif op["kind"] in ("refund", "revoke") or op["kind"] == "race" and op["argv"][0].split("-")[0] in ("refund", "revoke"):
            resets[None].append(op["start"])
    # A channel's refund or dispute revokes as an operator's refund does.
    resets[None].extend(world.channel_withdrawals)
    for earlier, fetch, start in resumed_downloads(world.proxy.fetches):
        if start < earlier.start:
            window = [t for t in resets[(fetch.home, fetch.product)] + resets[None] if earlier.opened <= t <= fetch.opened]
            if not window:
                earlier_end = earlier.start + earlier.bytes
                flag("restarted", f"home {fetch.home}: {fetch.product} asked from byte {start} though it had fetched {earlier.start}–{earlier_end} of the same version", fetch.home, fetch.product)
