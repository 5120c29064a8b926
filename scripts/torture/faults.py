"""The history's faults: a client SIGKILLed or SIGSTOPped past its claim's lease while another
process takes its download over, the server SIGKILLed and restarted, content responses cut or
frozen and answers dropped (armed on the proxy), a catalog reload with new content, the agent
killed, a book withdrawn or put back, home b's disk filled; and the list of every fault that
happened, the driver's and the proxy's, in time order."""
import json, os, signal, time

from .common import AGENT_HOME, BOOKS, CLAIM_LEASE, ISSUES, LARGE, MIB, free_disk


def fault(world):
    rng = world.rng
    kinds = ["client-kill", "client-stop", "server-kill", "cut", "stall", "drop-answer", "reload", "agent-kill", "withdraw", "battery"] + (["disk-full"] if world.disk else [])
    weights = [26, 8, 8, 20, 10, 12, 8, 5, 5, 6] + ([10] if world.disk else [])
    kind = rng.choices(kinds, weights=weights)[0]
    detail = ""
    home = "b" if kind == "disk-full" else None
    when = None
    if kind == "client-kill":
        if not world.running:
            # Start something that downloads, then kill it mid-way.
            home = rng.choice(["a", "b", "c"])
            world.launch("resume", home, ["resume"])
            time.sleep(rng.uniform(0.2, 2.0))
        victim = rng.choice(world.running) if world.running else None
        if victim is None:
            return
        victim.process.send_signal(signal.SIGKILL)
        detail = f"op {victim.index} ({' '.join(victim.argv)}) on {victim.home}"
        home = victim.home
    elif kind == "client-stop":
        suspended = suspend_owner(world)
        if suspended is None:
            return
        detail, home, when = suspended
    elif kind == "server-kill":
        world.server.kill()
        # The fault's moment is the kill, not the restart after the pause: refetched.py gives a
        # fetch a second of slack after it closed, and the pause alone can be 1.5 s.
        when = time.time()
        time.sleep(rng.uniform(0, 1.5))
        world.server.start()
        detail = f"restarted on port {world.server.port}"
    elif kind == "cut":
        if world.proxy.cut_active() == 0:
            world.proxy.arm("cut", rng.randint(64 << 10, 8 * MIB))
            detail = "armed for the next content response"
        else:
            detail = "open content responses reset"
    elif kind == "stall":
        seconds = rng.uniform(2.5, 4.0)
        if world.proxy.stall_active(seconds) == 0:
            world.proxy.arm("stall", (rng.randint(64 << 10, 8 * MIB), seconds))
            detail = f"armed: {seconds:.1f} s"
        else:
            detail = f"open content responses frozen {seconds:.1f} s"
    elif kind == "drop-answer":
        world.proxy.arm("drop-answer", None)
        detail = "the next payment, redemption or finish answer is lost"
    elif kind == "reload":
        id = rng.choice(LARGE + [ISSUES[2]])
        folder = world.store / "Content" / world.catalog[id]["content"]["path"]
        (folder / "edition.md").write_text(f"edition {len(world.faults)} of seed {world.args.seed}\n")
        world.server.process.send_signal(signal.SIGHUP)
        detail = f"{id} has new content"
    elif kind == "battery":
        # A policy change on the agent's device and its battery drained under it, or charged again:
        # the agent holds its own downloads while low, bytes kept, and carries on once charging.
        if rng.random() < 0.5:
            floor = rng.choice([30, 50])
            world.run_now(AGENT_HOME, ["config", "set", "battery-floor", str(floor)])
            world.set_battery(rng.randint(5, floor - 1), "Discharging")
            detail = f"home {AGENT_HOME}: battery-floor {floor} %, the battery under it"
        else:
            world.set_battery(90, "Charging")
            detail = f"home {AGENT_HOME}: charging"
        home = AGENT_HOME
    elif kind == "agent-kill":
        world.agent.send_signal(signal.SIGKILL)
        when = time.time()  # the kill's moment, as for server-kill
        world.agent.wait()
        time.sleep(rng.uniform(0, 1.5))
        world.start_agent()
        detail = f"home {AGENT_HOME}'s agent killed and started again"
        home = AGENT_HOME
    elif kind == "withdraw":
        # A book taken out of the catalog files (its owners keep it), or one put back.
        books = json.loads((world.store / "Catalog/books.json").read_text())
        if world.withdrawn and (rng.random() < 0.4 or len(world.withdrawn) == len(BOOKS)):
            id = rng.choice(sorted(world.withdrawn))
            books["products"].append(world.catalog[id])
            world.withdrawn.remove(id)
            detail = f"{id} back on sale"
        else:
            id = rng.choice(sorted(set(BOOKS) - world.withdrawn))
            books["products"] = [p for p in books["products"] if p["id"] != id]
            world.withdrawn.add(id)
            detail = f"{id} taken out of the catalog files"
        (world.store / "Catalog/books.json").write_text(json.dumps(books, indent=2))
        world.server.process.send_signal(signal.SIGHUP)
    elif kind == "disk-full":
        fill_disk(world, rng.uniform(1.0, 4.0))
        detail = f"home b's disk filled for {world.filler_until - time.time():.1f} s"
    # Faults the proxy carries out are counted when they happen (carried_out), not when armed.
    if kind not in ("cut", "stall", "drop-answer"):
        # A full disk ends every transfer of the home that writes while it is full: until freed.
        until = {"until": world.filler_until} if kind == "disk-full" else {}
        world.faults.append({"index": len(world.ops), "kind": kind, "time": when or time.time(), "detail": detail, "home": home, **until})
    else:
        world.armed.append({"index": len(world.ops), "kind": kind, "time": time.time(), "detail": detail})


def suspend_owner(world):
    """client-stop: SIGSTOP a client that is downloading, for longer than its claim's lease; start
    another `kiosk resume` on its home meanwhile, which takes the download over; then SIGCONT the
    first, which must find its claim gone and stop without writing. Returns (detail, home, when
    it was stopped), or None when nothing was downloading."""
    rng = world.rng

    def downloading():
        # Only a home's sole process: then the open content responses of the home are its own.
        busy = world.proxy.downloading_homes()
        return [r for r in world.running if r.home in busy and r.process.poll() is None
                and sum(1 for other in world.running if other.home == r.home) == 1]

    found = downloading()
    if not found:
        # Start a download: buy a large item the home's account does not hold yet, else resume.
        idle = [home for home in ("a", "b", "c") if not any(r.home == home for r in world.running)]
        if not idle:
            return None
        home = rng.choice(idle)
        fresh = [id for id in LARGE + ISSUES[2:] if id not in world.held(world.account_of(home)[0])]
        if fresh:
            product = rng.choice(fresh)
            world.launch("buy-large" if product in LARGE else "buy-issue", home, ["buy", product])
        else:
            world.launch("resume", home, ["resume"])
        deadline = time.time() + 4
        while time.time() < deadline and not found:
            time.sleep(0.05)
            found = downloading()
        if not found:
            return None
    victim = rng.choice(found)
    victim.process.send_signal(signal.SIGSTOP)
    stopped = time.time()
    try:
        frozen = world.proxy.freeze_home(victim.home)
        time.sleep(CLAIM_LEASE + rng.uniform(0.5, 1.5))
        takeover = world.launch("takeover", victim.home, ["resume"])
        time.sleep(rng.uniform(0.5, 3.0))
    finally:
        victim.process.send_signal(signal.SIGCONT)
    detail = (f"op {victim.index} ({' '.join(victim.argv)}) on {victim.home} stopped {time.time() - stopped:.1f} s with {frozen} open "
              f"responses; op {takeover['index']} took over")
    return detail, victim.home, stopped


def carried_out(world):
    """Every fault that happened, in time order: the driver's own and the proxy's."""
    starts = [op["start"] for op in world.ops]
    proxy = [{"index": sum(1 for t in starts if t <= when), "kind": kind, "time": when, "detail": detail} for when, kind, detail in world.proxy.fired]
    return sorted(world.faults + proxy, key=lambda f: f["time"])


def fill_disk(world, seconds):
    """Fills home b's tmpfs until not even a page is left, for `seconds` (lift_full_disk frees it)."""
    filler = world.disk / "filler"
    with open(filler, "ab") as out:
        # Claim the free space in shrinking pieces until not even a page is left.
        piece = free_disk(world.disk)
        while piece >= 4096:
            try:
                os.posix_fallocate(out.fileno(), out.seek(0, os.SEEK_END), piece)
            except OSError:
                piece //= 2
    world.filler_until = time.time() + seconds


def lift_full_disk(world, force=False):
    if world.filler_until and (force or time.time() > world.filler_until):
        (world.disk / "filler").unlink(missing_ok=True)
        world.filler_until = None

