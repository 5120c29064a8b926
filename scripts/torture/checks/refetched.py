"""Bytes are fetched twice only after a connection that a fault, a pause, a cancel or a revocation
ended: what was in flight when it ended. A suspended owner (client-stop, update-takeover) keeps its response
open while another process takes the download over from the bytes the owner had committed: what it
had in flight and not yet committed is fetched again. From the proxy's requests and the driver's
record of faults and operations."""
import time

from ..proxy import resumed_downloads

INVARIANTS = ("refetched",)


def check(facts, flag):
    world = facts.world
    # What may end a transfer early: faults (a proxy fault marks its fetch itself) and the reader.
    # (The agent's SIGKILL ends its transfer as a client's does.)
    # Each stopper is (from, until, home, product): a full disk stops a home's transfers for as
    # long as it stays full, the others at one moment.
    stoppers = [(f["time"], f.get("until", f["time"]), f.get("home"), None) for f in world.faults
                if f["kind"] in ("client-kill", "client-stop", "server-kill", "disk-full", "agent-kill")]
    # A server killed in the middle of an update cuts every home's responses; a client killed, its own.
    stoppers += [(f["time"], f.get("until", f["time"]), None if f["kind"] == "update-server-kill" else f.get("home"), None) for f in world.faults
                 if f["kind"] in ("update-client-kill", "update-server-kill", "update-takeover", "update-disk-full")]
    stoppers += [(op["start"], op["start"], op["home"], op["argv"][1]) for op in world.ops if op["kind"] in ("pause", "cancel")]
    stoppers += [(op["end"] or time.time(), op["end"] or time.time(), op["home"], None) for op in world.ops if op.get("hung")]
    # A revocation stops its purchase's transfer at its next progress write and forgets its bytes
    # (the content is the store's again): an operator's refund or revocation, in a race or not, or
    # a payment channel's refund. A purchase made again fetches them again.
    revocations = [op["start"] for op in world.ops
                   if op["kind"] in ("refund", "revoke") or op["kind"] == "race" and op["argv"][0].split("-")[0] in ("refund", "revoke")]
    stoppers += [(when, when, None, None) for when in revocations + world.channel_withdrawals]

    def explained(fetch):
        if fetch.faulted or fetch.end == "upstream-gone":
            return True
        closed = fetch.closed or time.time()
        return any(fetch.opened - 0.5 <= until and start <= closed + 1.0 and home in (None, fetch.home) and product in (None, fetch.product)
                   for start, until, home, product in stoppers)

    for earlier, fetch, start in resumed_downloads(world.proxy.fetches):
        earlier_end = earlier.start + earlier.bytes
        if earlier_end > start and not explained(earlier):
            flag("refetched", f"home {fetch.home}: {fetch.product} fetched bytes {start}–{earlier_end} again though no fault, pause or cancel ended the fetch that had them", fetch.home, fetch.product)
