"""What a run prints: the operations and faults it carried out, what the server holds, the bytes the
proxy counted, what the updates did, and the table of invariants; after a failure, each violation
with the operations and faults that touched what broke."""
import re, time
from collections import Counter

from . import faults
from .checks import INVARIANTS
from .common import AGENT_HOME, FILE_UPDATES, MIB, UPDATES, log
from .proxy import resumed_downloads


def byte_counts(world):
    """Bytes the proxy forwarded in content responses: in all, in complete ones, in those cut off
    (faults, pauses, cancels), and how many of them were fetched again by the download that
    followed (refetched.py judges whether that was allowed)."""
    fetches = world.proxy.fetches
    return {"total": sum(f.bytes for f in fetches), "complete": sum(f.bytes for f in fetches if f.end == "complete"),
            "cut": sum(f.bytes for f in fetches if f.end != "complete"),
            "twice": sum(max(0, earlier.start + earlier.bytes - start) for earlier, _, start in resumed_downloads(fetches))}


CHUNK_NOTE = re.compile(r"^installed (\S+) in .*\(update .* \(([\d,]+) of ([\d,]+) chunks fetched\)\)$")


def update_counts(world, products=UPDATES):
    """What the updates of `products` did, from the proxy's requests and the clients' output:
    versions a home began to update by entries or chunks (fetched the manifest or a range), of
    those the ones that fetched the whole archive after all, and installs that say they were
    updates by entries (`(update … files changed)`) or by chunks (`(update … chunks fetched)`)."""
    served = [f for f in world.proxy.fetches if f.status in (200, 206) and f.product in products]
    by_entries = {(f.home, f.product, f.version) for f in served if f.kind in ("manifest", "entries")}
    whole = {(f.home, f.product, f.version or (f.etag or "").strip('"')) for f in served if f.kind == "archive"}
    installed = 0
    fetched = total = 0
    for log_file in world.logs.glob("*.log"):
        for line in log_file.read_text(errors="replace").splitlines():
            if not line.startswith("installed ") or " (update " not in line or line.split()[1] not in products:
                continue
            installed += 1
            note = CHUNK_NOTE.match(line)
            if note:
                fetched += int(note.group(2).replace(",", ""))
                total += int(note.group(3).replace(",", ""))
    return {"attempted": len(by_entries), "fallbacks": len(by_entries & whole), "installed": installed,
            "ranges": sum(1 for f in served if f.kind == "entries"), "versions": sum(len(world.versions[id]) - 1 for id in products),
            "range bytes": sum(f.bytes for f in served if f.kind == "entries"), "chunks fetched": fetched, "chunks": total}


def report(world, checker, elapsed):
    ops = Counter(op["kind"] for op in world.ops)
    timeline = faults.carried_out(world)
    kinds = Counter(f["kind"] for f in timeline)
    # Kept with the run's folder (--keep, or a failure): every fault and race as it happened.
    with open(world.logs / "history.log", "w") as out:
        for fault in timeline:
            out.write(f"{fault['time']:.2f} fault after op {fault['index']}: {fault['kind']} ({fault['detail']})\n")
        for op in world.ops:
            if op["kind"] == "race":
                out.write(f"{op['start']:.2f} op {op['index']} race on {op['home']}: {' '.join(op['argv'])} → {op['exit']}\n")
            elif op["kind"] == "update":
                out.write(f"{op['start']:.2f} op {op['index']} update scenario on {op['home']}: {' '.join(op['argv'][1:])} → {op['exit']}\n")
    # And every content request the proxy saw, for a failure's inspection.
    with open(world.logs / "fetches.log", "w") as out:
        for f in sorted(world.proxy.fetches, key=lambda f: f.opened):
            out.write(f"{f.opened:.2f}–{(f.closed or 0):.2f} {f.home} {f.product} {f.kind} {(f.version or f.etag or '')[:14]} status {f.status} "
                      f"from {f.start if f.status == 206 else f.range_start} {f.bytes} of {f.length} bytes {f.end}{' faulted' if f.faulted else ''}\n")
    log("")
    log(f"kiosk torture  seed {world.args.seed}  {world.args.engine}  {sum(ops.values())} operations  {len(timeline)} faults  {elapsed:.0f} s")
    log("  operations:  " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    log("  faults:      " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    races = [op for op in world.ops if op["kind"] == "race" and "race" in op]
    if races:
        outcomes = Counter(f"{op['argv'][0]} ({', '.join(f'{a} {v}' if isinstance(v, int) else f'{a} launched' for a, v in op['race'].items())})" for op in races)
        log("  races:       " + ", ".join(f"{k} ×{v}" for k, v in sorted(outcomes.items())))
    paid = [op for op in world.ops if op["kind"] in ("web-buy", "play-buy") and len(op["argv"]) > 1]
    if paid:
        deliveries = Counter(f"{op['kind'][:-4]} {op['argv'][1]}" + (f" (withdrawn {op['withdrawn']})" if op.get("withdrawn") else "") for op in paid)
        granted = Counter(t["paymentMethod"] for t in checker.facts.server.transactions if t["paymentMethod"] in ("stripe", "play"))
        log("  channels:    " + ", ".join(f"{k} ×{v}" for k, v in sorted(deliveries.items()))
            + f"; granted {granted['stripe']} through the web, {granted['play']} through Play")
    log(f"  server:      {checker.stats['transactions']} transactions ({checker.stats['renewals']} renewals by the store's worker), {checker.stats['charges']} charges, {checker.stats['refunds']} refunds, {checker.stats['grace windows']} grace windows")
    fetched = byte_counts(world)
    log(f"  bytes:       {fetched['total'] / MIB:.1f} MiB fetched = {fetched['complete'] / MIB:.1f} MiB in complete responses"
        f" + {fetched['cut'] / MIB:.1f} MiB cut off by faults, pauses and cancels; {fetched['twice'] / MIB:.1f} MiB of it fetched twice")
    updates = update_counts(world)
    log(f"  updates:     {updates['versions']} new versions of {len(UPDATES)} update products published; {updates['attempted']} updates begun by entries"
        f" ({updates['ranges']} ranges), {updates['installed']} installed by entries, {updates['fallbacks']} fell back to the whole archive")
    files = update_counts(world, FILE_UPDATES)
    chunked = getattr(world, "chunk_stats", {})
    log(f"  files:       {files['versions']} new editions of {len(FILE_UPDATES)} EPUB; {files['attempted']} updates begun by chunks"
        f" ({files['ranges']} ranges, {files['range bytes'] / 1024:.0f} KiB), {files['installed']} installed by chunks"
        f" ({files['chunks fetched']} of {files['chunks']} chunks fetched), {chunked.get('whole', 0)} whole downloads during an update"
        f" ({chunked.get('held chunks fetched whole', 0)} held chunks among their {chunked.get('bytes whole', 0) / 1024:.0f} KiB)")
    scenarios = [op for op in world.ops if op["kind"] == "update"]
    missed = sum(1 for op in scenarios if str(op["exit"]).startswith("fault not landed"))
    log(f"  scenarios:   {len(scenarios)} update scenarios, the fault landed in " + ", ".join(f"{k} {world.update_landed[k]}" for k in world.update_fault_kinds)
        + (f"; {missed} missed its update (tried again)" if missed else ""))
    on_files = [op for op in scenarios if op.get("product") in FILE_UPDATES]
    log(f"  on the EPUB: {len(on_files)} of them, {sum(1 for op in on_files if op.get('landed'))} interrupted or faulted mid-update: "
        + ", ".join(f"{k} {world.file_landed[k]}" for k in world.update_fault_kinds))
    settled = f"held everything {world.agent_settled:.1f} s after the history" if world.agent_settled is not None else "did NOT come to hold everything"
    log(f"  agent:       home {AGENT_HOME} ran only kiosk agent ({world.agent_starts} starts); it {settled}; {len(world.withdrawn)} book(s) left withdrawn")
    log(f"  trees:       {sum(world.trees_checked.values())} installed trees compared byte for byte with their published archive"
        f" ({world.trees_checked['during']} during the history, {world.trees_checked['final']} at the end)")
    log("")
    log("  invariant    count")
    failed = False
    for invariant in INVARIANTS:
        count = len(checker.violations.get(invariant, []))
        failed |= count > 0
        log(f"  {invariant:<12} {count}")
    return failed


def explain(world, checker):
    log("")
    log(f"FAILED — replay with: make torture SEED={world.args.seed} OPS={world.args.ops} ENGINE={world.args.engine}")
    for invariant, items in checker.violations.items():
        for message, home, product in items[:12]:
            log(f"  {invariant}: {message}")
            touching = [op for op in world.ops if (home is None or op["home"] in (home, None)) and (product is None or product in op["argv"] or op["kind"] in ("restore", "resume", "resume-wait", "twin", "takeover"))]
            if touching:
                first, last = touching[0]["start"], max((op["end"] or time.time()) for op in touching)
                shown = [op for op in touching if product is None or product in op["argv"]][-6:] or touching[-6:]
                for op in shown:
                    log(f"      op {op['index']} {op['kind']} on {op['home']}: kiosk {' '.join(op['argv'])} → {op['exit']}")
                for fault in faults.carried_out(world):
                    if first <= fault["time"] <= last and fault["index"] >= shown[0]["index"] - 3:
                        log(f"      fault after op {fault['index']}: {fault['kind']} ({fault['detail']})")
        if len(items) > 12:
            log(f"  … and {len(items) - 12} more {invariant}")
    log(f"  kept for inspection: {world.work} (logs/ has every operation's output)")

