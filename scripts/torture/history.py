"""The history (operations, faults and update scenarios, seeded) and the quiescence after it: every
Ask to Buy answered, the server restarted at real speed, every home but the agent's driven to
`resume --wait` success, and the agent's home left to its agent until it holds everything."""
import signal, sqlite3, subprocess, time

from . import channel_subscriptions, channels, faults, operations, stores, updates
from .common import AGENT_HOME, FILE_UPDATES, log
from .rules import coverage
from .rules.taken_in import taken_in


def history(world):
    rng = world.rng
    client_ops = 0
    # The update scenarios, spread evenly over the history (not counted as operations).
    scenarios = world.args.updates if world.args.updates is not None else max(len(world.update_fault_kinds) + 1, world.args.ops // 12)
    done = 0
    while client_ops < world.args.ops:
        world.reap()
        faults.lift_full_disk(world)
        world.note_installed()
        if done < scenarios and client_ops >= world.args.ops * (done + 1) / (scenarios + 1):
            updates.update_op(world)
            done += 1
            continue
        roll = rng.random()
        if roll < world.args.fault_rate:
            faults.fault(world)
        elif roll < world.args.fault_rate + 0.08:
            operations.admin_op(world)
            client_ops += 1
        elif roll < world.args.fault_rate + 0.12:
            operations.race_op(world)
            client_ops += 1
        elif roll < world.args.fault_rate + 0.17:
            channels.channel_op(world)
            client_ops += 1
        elif roll < world.args.fault_rate + 0.22:
            channel_subscriptions.op(world)
            client_ops += 1
        else:
            operations.client_op(world)
            client_ops += 1
        time.sleep(rng.uniform(0, 0.4))
        if client_ops % 25 == 0 and client_ops and roll >= world.args.fault_rate:
            log(f"  {client_ops} operations, {len(faults.carried_out(world))} faults")
    # Every kind of update fault lands at least once, and once on a publication file's update by
    # chunks: one more scenario for each that never did (at most two tries each).
    for fault in world.update_fault_kinds if scenarios else []:
        for _ in range(2):
            if not world.update_landed[fault]:
                updates.update_op(world, fault)
        for _ in range(2):
            if not world.file_landed[fault]:
                updates.update_op(world, fault, world.rng.choice(FILE_UPDATES))


def quiesce(world):
    """No more faults: lets everything finish, answers every Ask to Buy, then restores and
    resumes every home until nothing is left to do."""
    world.proxy.disarm()
    faults.lift_full_disk(world, force=True)
    world.reap(wait_for="all", timeout=300)
    channels.settle(world)
    # A clean restart publishes exactly what Content/ holds (a reload may still be packing),
    # with the sandbox clock at real speed: no renewal falls due while the homes settle.
    world.quiet = True
    world.server.stop()
    world.server.start()
    updates.note_published(world)
    for _ in range(20):
        status, pending = world.server.admin("GET", "/v1/admin/pending")
        entries = (pending if isinstance(pending, list) else (pending or {}).get("requests", [])) if status == 200 else []
        if not entries:
            break
        for entry in entries:
            world.server.admin("POST", f"/v1/admin/transactions/{entry['transactionId']}/{world.rng.choice(['approve', 'decline'])}")
    world.quiescence = {}
    # The agent's device charges again (faults.battery): its policy lets its downloads go.
    world.set_battery(90, "Charging")
    world.note_installed()
    for home in world.homes:
        if home == AGENT_HOME:
            continue
        rounds = 0
        # What the newsstand's tidy or the reader removed stays owned: the reader gets each back
        # with kiosk resume ID (checks/owned_installed.py finds any that did not come back).
        for product in stores.removed_downloads(world, home):
            world.run_now(home, ["resume", product])
        for rounds in range(1, 6):
            world.run_now(home, ["sync"])
            world.note_installed(home)
            world.run_now(home, ["restore"])
            world.note_installed(home)
            result = world.run_now(home, ["resume", "--wait", "--max-wait", "120"], timeout=900)
            world.note_installed(home)
            if result.returncode == 0:
                break
        world.quiescence[home] = rounds
    settle_agent(world)


def settle_agent(world, limit=180):
    """The agent's home runs no command: its agent alone must come to hold every transaction
    of its account that it should, with the content installed in the version the catalog names
    now (a new edition published before the restart is the agent's to fetch, at the catalog
    change its long poll hears of). Waits until it does (or the limit passes: the checker then
    says what is missing), then stops the agent."""
    started = time.time()
    account = world.account_of(AGENT_HOME)[0]
    published = updates.published_catalog(world)
    while time.time() - started < limit:
        if world.agent.poll() is not None:
            world.start_agent()
        world.note_installed(AGENT_HOME)
        transactions = stores.account_transactions(world, account)
        owned = coverage.owned_products(transactions, stores.grace_windows(world, account), world.catalog).get(account, set())
        expected = {t["id"] for t in transactions if taken_in(t)}
        try:
            held, unfinished, installed, downloads = stores.agent_progress(world, AGENT_HOME)
        except sqlite3.Error:
            held, unfinished, installed, downloads = set(), 1, set(), 1
        current = all(published.get(product, sha) == sha for product, sha in installed.items())
        if expected <= held and not unfinished and owned == set(installed) and current and not downloads:
            world.agent_settled = time.time() - started
            break
        time.sleep(0.5)
    world.agent.send_signal(signal.SIGTERM)
    try:
        world.agent.wait(20)
    except subprocess.TimeoutExpired:
        world.agent.kill()
    world.quiescence[AGENT_HOME] = 0
