"""Updates: new versions of the update products published during the history (a zip's: two entries
changed, one removed, one added; a publication file's: a new edition of the EPUB, another chapter
revised or a new printing; SIGHUP; every archive the catalog names kept for the checker), and the
update scenarios, each aiming one fault at a home's update by entries or by chunks (UPDATE_FAULTS in
turn), with the product's installed trees compared with their published archive before and after."""
import json, os, signal, subprocess, sys, time, urllib.error, urllib.request

from . import faults, stores
from .common import AGENT_HOME, CLAIM_LEASE, EPUB_SHAPE, FILE_UPDATES, ROOT, UPDATES, log


def entry_bytes(world):
    """One small entry of an update product: random bytes (stored) or text (deflated)."""
    rng = world.update_rng
    if rng.random() < 0.5:
        return rng.randbytes(rng.randint(200, 4000))
    return "".join(f"line {n} of entry {rng.randrange(10 ** 6)}\n" for n in range(rng.randint(10, 120))).encode()


def write_edition(world, id, path):
    """Writes the edition world.editions[id] names, (seed, revised chapter), of publication file
    `id` to `path` with scripts/make_epub.py, by a rename (a reload never reads half a file)."""
    seed, revise = world.editions[id]
    temporary = world.work / "publish.epub"
    name = id.rsplit(".", 1)[-1]
    subprocess.run([sys.executable, str(ROOT / "scripts/make_epub.py"), str(temporary), "--title", f"Harbor {name}",
                    "--identifier", f"urn:uuid:7e570000-0000-4000-8000-{seed:012d}", "--chapters", str(EPUB_SHAPE["chapters"]),
                    "--chapter-bytes", str(EPUB_SHAPE["chapter_bytes"]), "--plates", str(EPUB_SHAPE["plates"]),
                    "--plate-bytes", str(EPUB_SHAPE["plate_bytes"]), "--seed", str(seed), "--revise", str(revise)], check=True)
    os.replace(temporary, path)


def new_edition(world, id):
    """The next edition of publication file `id`: another chapter revised (the rest byte for byte
    the same, so an update fetches a few chunks), or one time in eight a new printing (another seed:
    every byte differs, the update fetches every chunk). Never an edition published before."""
    rng = world.update_rng
    seed, revise = world.editions[id]
    used = world.editions_used.setdefault(id, {world.editions[id]})
    while True:
        if rng.random() < 1 / 8:
            seed, revise = seed + 1, rng.randint(0, EPUB_SHAPE["chapters"])
        else:
            revise = rng.choice([n for n in range(0, EPUB_SHAPE["chapters"] + 1) if n != revise])
        if (seed, revise) not in used:
            break
    used.add((seed, revise))
    world.editions[id] = (seed, revise)
    write_edition(world, id, world.store / "Content" / world.catalog[id]["content"]["path"])


def published_catalog(world):
    """product → the archive SHA-256 the server's catalog names now, asked past the proxy."""
    try:
        with urllib.request.urlopen(world.server.url + "/v1/catalog", timeout=30) as answer:
            catalog = json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError):
        return {}
    return {p["id"]: p["content"]["sha256"] for p in catalog.get("products", []) if (p.get("content") or {}).get("sha256")}


def note_published(world, catalog=None):
    """Notes every version the catalog names and keeps its archive for the checker."""
    for id, sha in (catalog or published_catalog(world)).items():
        if sha not in world.versions[id]:
            world.versions[id].append(sha)
            world.published.keep(sha, world.server_data / "content")


def publish(world, id):
    """A new version of update product `id`: a zip's, two entries changed, one removed, one added
    (each file replaced by a rename, so a reload never reads one half-written); a publication
    file's, a new edition (new_edition); SIGHUP, then waits until the catalog names it. Returns its
    archive's SHA-256, or None."""
    rng = world.update_rng
    world.update_serial += 1
    if id in FILE_UPDATES:
        new_edition(world, id)
    else:
        folder = world.store / "Content" / world.catalog[id]["content"]["path"]
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        changed = rng.sample(files, 3)
        added = folder / f"part-{rng.randrange(4)}" / f"added-{world.update_serial:03d}.bin"
        for path in changed[:2] + [added]:
            temporary = world.work / "publish.tmp"
            temporary.write_bytes(entry_bytes(world))
            os.replace(temporary, path)
        changed[2].unlink()
    old = set(world.versions[id])
    world.server.process.send_signal(signal.SIGHUP)
    deadline = time.time() + 90
    while time.time() < deadline:
        catalog = published_catalog(world)
        if catalog.get(id) and catalog[id] not in old:
            note_published(world, catalog)
            return catalog[id]
        time.sleep(0.1)
    log(f"torture: the server did not publish the new version of {id} within 90 s")
    return None


def check_installed(world, home, id, when):
    """Compares home's installed tree of `id` with the published archive of the version the
    home names, when no process runs on the home. Failures are flagged by the checker."""
    if any(r.home == home for r in world.running):
        return
    version = stores.installed_version(world, home, id)
    if not version:
        return
    world.trees_checked[when] += 1
    problem = world.published.compare(stores.installed_tree(world, home, id), id, version, world.versions[id], world.server_data / "content")
    if problem:
        world.tree_failures.append((f"home {home}: {id} {problem} ({when} the history)", home, id))


def update_op(world, fault=None, product=None):
    """A new version of an update product is published while a home updates to it by entries (a
    zip) or by chunks (a publication file, half the scenarios), and one fault is aimed at that
    update (UPDATE_FAULTS, in turn): the client SIGKILLed in the middle of a range then resumed; a
    range cut after a few bytes; the server SIGKILLed while a range is held, and restarted; the
    version replaced once or twice more while a range is held; an installed file edited by hand
    before the update; the client stopped past its lease while another process takes the update
    over; a range stalled for seconds; home b's disk filled while a range is held. Installed trees
    of the product are checked before and after, byte for byte."""
    rng = world.rng
    if not world.update_faults:
        world.update_faults = rng.sample(world.update_fault_kinds, len(world.update_fault_kinds))
    fault = fault or world.update_faults.pop()
    id = product or rng.choice(UPDATES + FILE_UPDATES * len(UPDATES))
    chunked = id in FILE_UPDATES
    # Home b's database cannot be read while its disk is full: an update begins on free disks.
    faults.lift_full_disk(world, force=True)
    world.note_installed()
    # Homes that have it installed and still own it (a refund takes it away at the next sync).
    # Not the agent's home: its agent updates by itself, whenever the catalog changes, and the
    # home runs no command (its trees are checked at the end).
    holders = [h for h in world.homes if h != AGENT_HOME and stores.installed_version(world, h, id) and id in world.held(world.account_of(h)[0])]
    if fault == "disk-full":
        # Only home b has a disk of its own to fill.
        home = "b"
    else:
        home = rng.choice(holders or sorted(h for h in world.homes if h != AGENT_HOME))
    op = {"index": len(world.ops), "kind": "update", "home": home, "argv": ["update", id, fault], "start": time.time(), "end": None, "exit": None,
          "product": id}
    world.ops.append(op)
    # The home alone: its own processes finish first, so that the fault lands on this update.
    for run in [r for r in world.running if r.home == home]:
        world.reap(wait_for=run)
    if home not in holders:
        world.launch("buy-update", home, ["buy", id])
        world.reap(wait_for=world.running[-1])
    check_installed(world, home, id, "during")
    before = stores.installed_version(world, home, id)
    op["before"] = before
    version = publish(world, id)
    # Another home that has it, if one is idle, updates at the same time, in the background.
    bystanders = [h for h in holders if h != home and not any(r.home == h for r in world.running)]
    for other in [home] + bystanders[:1]:
        world.launch("update-sync", other, ["sync"])
        world.reap(wait_for=world.running[-1])
    if bystanders:
        world.launch("update-resume", bystanders[0], ["resume"])
    detail = None
    edited = None
    if fault == "hand-edit":
        # An installed file changed in place by hand (same size, other bytes): the update must
        # fetch it again rather than keep it (a publication file: the chunk that holds the byte).
        files = sorted(p for p in (world.homes[home] / "Library" / id).rglob("*") if p.is_file() and not p.is_symlink())
        if files:
            path = rng.choice(files)
            offset = rng.randrange(max(1, path.stat().st_size)) if chunked else 0
            with open(path, "r+b") as out:
                out.seek(offset)
                first = out.read(1)
                out.seek(offset)
                out.write(bytes([first[0] ^ 0x5A]) if first else b"")
            edited = (path, offset, first)
            world.hand_edits.append({"home": home, "product": id, "time": time.time(), "until": None, "offset": offset, "version": before})
            detail = f"{path.relative_to(world.homes[home])} on {home} edited by hand at byte {offset} before the update"
            world.faults.append({"index": len(world.ops), "kind": "update-hand-edit", "time": time.time(), "detail": detail, "home": home})
    # A byte inside one of the first ranges (an entry's local header alone is over 30 bytes;
    # a version changes at least two entries and adds one, so there are at least two ranges
    # unless entries lie side by side; a publication file's ranges are whole chunks of 4 KiB
    # or more: the revised chapter's, the central directory's at the end).
    at = rng.randint(0, 90)
    if fault != "hand-edit":
        world.proxy.arm_entries(home, id, "cut" if fault == "cut-range" else "hold", at, skip=rng.choice([0, 0, 1]))
    update = world.launch("update-resume", home, ["resume"])
    running = world.running[-1]
    if fault not in ("cut-range", "hand-edit"):
        deadline = time.time() + 10
        held = None
        while time.time() < deadline and running.process.poll() is None and not (held := world.proxy.holding(home, id)):
            time.sleep(0.02)
        if held:
            struck = time.time()
            where = f"op {update['index']} on {home} held at byte {held.bytes} of the range from {held.range_start} of {id}"
            if fault == "client-kill" and rng.random() < 0.5:
                running.process.send_signal(signal.SIGKILL)
                world.proxy.release(home, id)
                detail = f"{where}: client SIGKILLed"
            elif fault == "client-kill":
                # Released first: the kill lands later in the update (another range, the tree's
                # check, the swap) or after it.
                world.proxy.release(home, id)
                delay = rng.uniform(0, 0.4)
                time.sleep(delay)
                running.process.send_signal(signal.SIGKILL)
                detail = f"{where}: released, client SIGKILLed {delay:.2f} s later"
            elif fault == "takeover":
                # Stopped past its claim's lease while another `kiosk resume` on the home takes
                # the update over; then continued, it must find its claim gone and install nothing.
                running.process.send_signal(signal.SIGSTOP)
                try:
                    world.proxy.freeze_home(home)
                    world.proxy.release(home, id)
                    time.sleep(CLAIM_LEASE + rng.uniform(0.5, 1.0))
                    taker = world.launch("update-takeover", home, ["resume"])
                    time.sleep(rng.uniform(0.2, 1.5))
                finally:
                    running.process.send_signal(signal.SIGCONT)
                detail = f"{where}: client stopped past its lease, op {taker['index']} took over, then continued"
            elif fault == "server-kill":
                world.server.kill()
                world.proxy.release(home, id)
                time.sleep(rng.uniform(0.2, 1.5))
                world.server.start()
                detail = f"{where}: server SIGKILLed, restarted on port {world.server.port}"
            elif fault == "stall":
                # The range stalls for seconds (longer than a whole download's stall limit), then
                # goes on: the update must finish without fetching anything twice.
                seconds = rng.uniform(2.5, 5.0)
                time.sleep(seconds)
                world.proxy.release(home, id)
                detail = f"{where}: stalled {seconds:.1f} s, then released"
            elif fault == "disk-full":
                # Home b's disk filled while the range is held: what arrives next cannot be written.
                faults.fill_disk(world, 60)
                world.proxy.release(home, id)
                seconds = rng.uniform(0.5, 2.5)
                time.sleep(seconds)
                faults.lift_full_disk(world, force=True)
                freed = time.time()
                detail = f"{where}: home b's disk filled, released, freed {seconds:.1f} s later"
            else:
                replaced = [publish(world, id) for _ in range(rng.choice([1, 2]))]
                world.proxy.release(home, id)
                detail = f"{where}: {len(replaced)} newer version(s) published meanwhile"
            # When it struck (a takeover: when the owner was stopped), not when the driver is done with it.
            # A full disk ends every transfer of the home that writes while it is full: until freed.
            until = {"until": freed} if fault == "disk-full" else {}
            world.faults.append({"index": len(world.ops), "kind": f"update-{fault}", "time": struck, "detail": detail, "home": home, **until})
    for run in [r for r in world.running if r.home == home]:
        world.reap(wait_for=run)
    world.proxy.release(home, id)
    left = world.proxy.disarm_entries(home, id)
    # Then resumed (after a replacement, synced first) until it is done.
    if fault == "replace":
        world.launch("update-sync", home, ["sync"])
        world.reap(wait_for=world.running[-1])
    world.launch("update-resume", home, ["resume", "--wait", "--max-wait", "20"])
    world.reap(wait_for=world.running[-1])
    if edited and stores.installed_version(world, home, id) == before and edited[0].exists():
        # No update came to find the edit (it was interrupted past its retries): nothing else
        # reads installed files again, so the edit is undone rather than left for the checker.
        with open(edited[0], "r+b") as out:
            out.seek(edited[1])
            out.write(edited[2])
        detail += "; no update followed, edit undone"
    if edited:
        world.hand_edits[-1]["until"] = time.time()
    check_installed(world, home, id, "during")
    world.note_installed()
    landed = detail is not None or (fault == "cut-range" and not left)
    world.update_landed[fault] += landed
    if chunked:
        world.file_landed[fault] += landed
    if not landed:
        # Tried again at the next scenario (an update with a single range, say, has no second).
        world.update_faults.append(fault)
        detail = f"fault not landed: the update's op {update['index']} ended {world.ops[update['index']]['exit']} before it"
    op["exit"], op["end"] = (detail or "range cut"), time.time()
    op["version"] = version
    op["landed"] = landed
