"""Updates of publication files by chunks fetch only what the installed file lacks, and never go back
over what they built. From the proxy's requests, the store's manifests (each version's chunks, kept
in published/), the versions each home's library named as the history went (world.installed_seen)
and the driver's record of faults and operations.

- `refetched`: a range of an update by chunks holds a chunk its home's installed file holds (the
  device must copy it, not fetch it); a range fetched again although an earlier range of the same
  version had delivered it whole and nothing since stopped the home's client (the partial file
  keeps every chunk written, in order); an update downloaded whole (the ordinary download, from the
  start or from what the chunks built) although no fault ended any of its requests, so nothing made
  it leave the chunks (held chunks are then fetched again).
- `restarted`: a range of an update by chunks that asks for bytes before where an earlier request
  for the same version began (ranges are asked only after the partial file's checked prefix, and
  every range before an earlier request had been written), or any request that goes back before a
  range delivered whole: the partial file held them. Unless the reader cancelled, the store refunded or revoked something, or another
  process took the update over from a stopped owner (a takeover keeps only the owner's committed
  bytes, and an update by chunks commits them every 4 MiB) in between.

The installed version a range was cut against is bracketed: at least the newest the home's library
named before the request (a home's installed version only moves on), at most the one before the
version asked for; a chunk counts as held only when every version in that bracket holds it, and a
chunk that held a byte edited by hand (the hand-edit fault) does not count."""
import time
from collections import defaultdict

from .. import stores
from ..common import FILE_UPDATES

INVARIANTS = ("refetched", "restarted")

# Faults after which a client may not have written what it had received (it was killed, stopped, or
# its disk was full): a range delivered whole to it may be fetched again.
CLIENT_STOPPERS = ("client-kill", "client-stop", "disk-full", "agent-kill", "update-client-kill", "update-takeover", "update-disk-full")
TAKEOVERS = ("client-stop", "update-takeover")
# A stall holds a request 2.5–5 s, past the clients' KIOSK_STALL_SECONDS (2): the client gives the
# range up (its partial chunk unwritten) before the proxy, released, sends the rest to a closed socket.
STALLS = ("stall", "update-stall")


def version_of(fetch):
    return fetch.version or (fetch.etag or "").strip('"') or None


def resets(world):
    """(home, product) or None (any) → when bytes were legitimately dropped: a cancel, a refund or
    revocation (an operator's, in a race or not, or a channel's)."""
    found = defaultdict(list)
    for op in world.ops:
        if op["kind"] == "cancel":
            found[(op["home"], op["argv"][1])].append(op["start"])
        elif op["kind"] in ("refund", "revoke") or op["kind"] == "race" and op["argv"][0].split("-")[0] in ("refund", "revoke"):
            found[None].append(op["start"])
    found[None].extend(world.channel_withdrawals)
    return found


def reset_between(found, home, product, start, end):
    return any(start <= t <= end for t in found[(home, product)] + found[None])


def fault_times(world, home, kinds):
    """When faults of `kinds` hit `home` (or every home: a fault of no home; a2's agent counts as its client)."""
    times = [f["time"] for f in world.faults if f["kind"] in kinds and f.get("home") in (None, home)]
    times += [op["end"] or time.time() for op in world.ops if op.get("hung") and op["home"] == home]
    return times


def installed_bracket(world, home, product, opened, version):
    """The versions the home's installed file may have been when a request for `version` opened."""
    versions = world.versions[product]
    if version not in versions:
        return None
    observed = [v for when, v in world.installed_seen[(home, product)] if when < opened]
    if observed and observed[-1] == stores.NOT_INSTALLED:
        return None  # taken out of the library (a revocation) since: what is fetched now is no update
    seen = [versions.index(v) for when, v in world.installed_seen[(home, product)] if when < opened and v in versions]
    if not seen:
        return None
    low, high = max(seen), versions.index(version)
    return versions[low:high] if low < high else None


def check(facts, flag):
    world = facts.world
    content = world.server_data / "content"
    found = resets(world)
    fetches = defaultdict(list)   # (home, product, version) → every content request for it, as opened
    for fetch in sorted(world.proxy.fetches, key=lambda f: f.opened):
        if fetch.product in FILE_UPDATES and version_of(fetch):
            fetches[(fetch.home, fetch.product, version_of(fetch))].append(fetch)
    world.chunk_stats = stats = {"ranges": 0, "updates": 0, "whole": 0, "held chunks fetched whole": 0, "bytes whole": 0}
    for (home, product, version), requests in fetches.items():
        chunks = world.published.chunks(version, content)
        served = [f for f in requests if f.status in (200, 206) and f.kind in ("entries", "archive")]
        ranges = [f for f in served if f.kind == "entries"]
        stats["ranges"] += len(ranges)
        stats["updates"] += bool(installed_bracket(world, home, product, requests[0].opened, version)) and any(f.kind in ("manifest", "entries") for f in requests)
        if chunks is None:
            continue
        # Ranges hold no chunk the installed file holds.
        for fetch in ranges:
            bracket = installed_bracket(world, home, product, fetch.opened, version)
            lists = [world.published.chunks(v, content) for v in bracket or []]
            if not bracket or any(c is None for c in lists):
                continue
            held = set.intersection(*({sha for _, _, sha in c} for c in lists))
            for edit in world.hand_edits:
                if (edit["home"], edit["product"]) == (home, product) and edit["time"] <= fetch.opened <= (edit["until"] or time.time()):
                    held -= {sha for offset, length, sha in world.published.chunks(edit["version"], content) or []
                             if offset <= edit["offset"] < offset + length}
            end = fetch.start + fetch.bytes
            refetched = [(offset, length) for offset, length, sha in chunks if offset < end and offset + length > fetch.start and sha in held]
            if refetched:
                names = ", ".join(f"v{world.versions[product].index(v) + 1}" for v in bracket)
                flag("refetched", f"home {home}: {product} v{world.versions[product].index(version) + 1} fetched by range {len(refetched)} chunk(s) "
                     f"({sum(n for _, n in refetched)} bytes, from byte {refetched[0][0]}) that its installed file ({names}) holds", home, product)
        # No request goes back over what an earlier one of the version built.
        for index, later in enumerate(served):
            for earlier in served[:index]:
                if earlier.kind == "archive" and later.kind == "archive":
                    continue  # restarted.py and refetched.py judge whole downloads against each other
                if reset_between(found, home, product, earlier.opened, later.opened):
                    continue
                # A takeover anywhere in the update: the new owner keeps only committed bytes, and
                # the stopped owner, once continued, still fetches the rest of its ranges before it
                # finds its claim gone (it checks the claim every 4 MiB and at the end).
                if any(served[0].opened - 0.5 <= t <= later.opened for t in fault_times(world, home, TAKEOVERS)):
                    continue
                how = "by range" if later.kind == "entries" else "whole"
                if later.kind == "entries" and later.start < earlier.start:
                    # A range is asked only of chunks after the partial file's checked prefix, and an
                    # earlier request began past that prefix: every range before it had been written.
                    flag("restarted", f"home {home}: {product} asked {how} from byte {later.start} of {version[:12]} though an earlier request "
                         f"for it had begun at byte {earlier.start}", home, product)
                elif (earlier.kind == "entries" and earlier.end == "complete" and later.start < earlier.start + earlier.bytes
                      and not any(earlier.opened - 0.5 <= t <= later.opened for t in fault_times(world, home, CLIENT_STOPPERS + STALLS))):
                    flag("restarted" if later.start < earlier.start else "refetched",
                         f"home {home}: {product} fetched bytes {later.start}–{earlier.start + earlier.bytes} of {version[:12]} again "
                         f"({how}) though its range from byte {earlier.start} had delivered them whole and nothing stopped the client", home, product)
        # A whole download during an update is a fallback a fault must explain.
        for fetch in [f for f in served if f.kind == "archive"]:
            bracket = installed_bracket(world, home, product, fetch.opened, version)
            if not bracket:
                continue
            seen = [when for when, v in world.installed_seen[(home, product)] if when < fetch.opened and v in bracket]
            if reset_between(found, home, product, max(seen, default=0), fetch.opened):
                continue
            lists = [world.published.chunks(v, content) for v in bracket]
            held = set.intersection(*({sha for _, _, sha in c} for c in lists)) if all(lists) else set()
            whole = [(offset, length) for offset, length, sha in chunks if offset + length > fetch.start and offset < fetch.start + fetch.bytes and sha in held]
            stats["whole"] += 1
            stats["held chunks fetched whole"] += len(whole)
            stats["bytes whole"] += fetch.bytes
            first = requests[0].opened
            ended = [f for f in requests if f.opened < fetch.opened and (f.faulted or f.end != "complete" or f.status not in (200, 206))]
            stopped = [t for t in fault_times(world, home, CLIENT_STOPPERS + ("server-kill", "update-server-kill", "update-cut", "cut", "stall"))
                       if first - 0.5 <= t <= fetch.opened]
            if whole and not ended and not stopped:
                flag("refetched", f"home {home}: {product} v{world.versions[product].index(version) + 1} downloaded whole from byte {fetch.start} "
                     f"({len(whole)} chunks its installed file holds among them) though no fault ended any request of its update", home, product)
