"""The history's operations: a customer's command on a home (every kind of purchase, redemption,
restore, resume, pause, cancel, sync, two processes at once), an operator's answer or refund, and
races of two conflicting actions on one transaction released together."""
import threading, time

from . import stores
from .common import AGENT_HOME, BOOKS, HARBOR, ISSUES, LARGE, PACKS, PREMIUM, SUBSCRIPTION, http


def client_op(world):
    rng = world.rng
    home = rng.choices(["a", "a2", "b", "c"], weights=[35, 15, 30, 20])[0]
    kind = rng.choices(
        ["buy-book", "buy-large", "buy-issue", "buy-subscription", "buy-credits", "buy-defer", "buy-refused",
         "redeem", "redeem-code", "buy-code", "change-plan", "restore", "resume", "resume-wait", "pause", "cancel", "sync", "twin",
         "tidy", "pin", "keep"],
        weights=[10, 12, 6, 5, 10, 6, 3, 8, 3, 4, 10, 6, 9, 5, 5, 3, 2, 6, 6, 3, 5])[0]
    if home == AGENT_HOME:
        # The agent's device runs no command: what a buys there reaches it through its agent.
        home = "a"
    if kind == "buy-book":
        argv = ["buy", rng.choice(BOOKS)] + (["--no-download"] if rng.random() < 0.25 else [])
    elif kind == "buy-large":
        argv = ["buy", rng.choice(LARGE)]
    elif kind == "buy-issue":
        argv = ["buy", rng.choice(ISSUES)]
    elif kind == "buy-subscription":
        argv = ["buy", SUBSCRIPTION]
    elif kind == "buy-credits":
        argv = ["buy", rng.choice(sorted(PACKS)), "--quantity", str(rng.randint(1, 4))]
    elif kind == "buy-defer":
        argv = ["buy", rng.choice(BOOKS + ISSUES + LARGE), "--payment", "defer"]
    elif kind == "buy-refused":
        argv = ["buy", rng.choice(BOOKS + ISSUES), "--payment", rng.choice(["decline", "cancel"])]
    elif kind == "redeem":
        argv = ["redeem", rng.choice(ISSUES + BOOKS + LARGE)]
    elif kind == "redeem-code":
        # A code as a reader types it: its case and its dashes do not matter.
        code = rng.choice(world.codes)
        argv = ["redeem-code", code.lower() if rng.random() < 0.3 else code]
    elif kind == "buy-code":
        # A code that takes money off, used when buying its book (spent only if the payment goes through).
        argv = ["buy", BOOKS[2], "--code", rng.choice(world.discount_codes)] + (["--payment", "decline"] if rng.random() < 0.2 else [])
    elif kind == "change-plan":
        # B's subscription (bought before the history) up to premium (at once, the unused part
        # credited) or back down (at the renewal), named by a plan of its group.
        home = "b"
        argv = ["subscription", "change", rng.choice([SUBSCRIPTION, PREMIUM]), "--to", rng.choice([PREMIUM, SUBSCRIPTION])]
    elif kind == "restore":
        argv = ["restore"]
    elif kind == "resume":
        argv = ["resume"]
    elif kind == "resume-wait":
        argv = ["resume", "--wait", "--max-wait", "15"]
    elif kind == "pause":
        argv = ["pause", rng.choice(LARGE + ISSUES[2:])]
    elif kind == "cancel":
        argv = ["cancel", rng.choice(LARGE + ISSUES[2:])]
    elif kind == "sync":
        argv = ["sync"]
    elif kind == "tidy":
        # The newsstand's tidy: issues past the title's keep rule lose their files, never their owner.
        argv = ["library", "--tidy"]
    elif kind == "pin":
        argv = [rng.choice(["pin", "unpin"]), rng.choice(ISSUES)]
    elif kind == "keep":
        # A strict rule makes the tidies remove; the default (12 monthly) keeps every issue here.
        argv = ["keep", HARBOR, *rng.choice([["--last", "1"], ["--last", "2"], ["--days", "1"], ["--default"]])]
    else:
        # Two processes on one home at once: the same purchase (one charge) or two resumes (one download).
        argv = rng.choice([["resume"], ["buy", rng.choice(LARGE)], ["buy", rng.choice(sorted(PACKS))], ["restore"], ["redeem-code", rng.choice(world.codes)],
                           ["buy", BOOKS[2], "--code", rng.choice(world.discount_codes)], ["subscription", "change", SUBSCRIPTION, "--to", PREMIUM]])
        if argv[0] == "subscription":
            # Two changes of B's plan at once: one period, one charge, one credit.
            home = "b"
    background = rng.random() < 0.6
    # One more process may take a home's lock-free paths at the same time, not a crowd.
    if sum(1 for r in world.running if r.home == home) >= 2:
        world.reap(wait_for=next(r for r in world.running if r.home == home))
    if kind == "twin":
        world.launch(kind, home, argv)
        world.launch(kind, home, argv)
        return
    world.launch(kind, home, argv)
    if not background:
        world.reap(wait_for=world.running[-1])

def admin_op(world):
    rng = world.rng
    kind = rng.choices(["approve", "decline", "refund", "revoke"], weights=[6, 3, 2, 1])[0]
    index = len(world.ops)
    op = {"index": index, "kind": kind, "home": None, "argv": [], "start": time.time(), "end": None, "exit": None}
    world.ops.append(op)
    if kind in ("approve", "decline"):
        status, pending = world.server.admin("GET", "/v1/admin/pending")
        if status != 200 or not pending:
            op["exit"], op["end"] = "nothing pending", time.time()
            return
        entries = pending if isinstance(pending, list) else pending.get("requests", [])
        if not entries:
            op["exit"], op["end"] = "nothing pending", time.time()
            return
        target = rng.choice(sorted(entries, key=lambda e: e["transactionId"]))["transactionId"]
        status, _ = world.server.admin("POST", f"/v1/admin/transactions/{target}/{kind}")
    else:
        # Refunds and revocations of books, issues and subscriptions (credit packs keep the
        # balance check exact: a refund takes back only what is left of their credits).
        ids = stores.refundable(world)
        if not ids:
            op["exit"], op["end"] = "nothing to refund", time.time()
            return
        target = rng.choice(ids)
        status, _ = world.server.admin("POST", f"/v1/admin/transactions/{target}/{kind}", {"reason": "torture"})

def race_op(world):
    """Two conflicting actions on one transaction at once, released together from two threads:
    a refund or revocation (operator) against the customer finishing it (POST …/finish) or
    `kiosk resume` delivering it, or an approval against a decline of one Ask to Buy (both
    operator). A 409 is the loser's legitimate answer; the outcome is the ops list's exit."""
    rng = world.rng
    variant = rng.choices(["refund-finish", "refund-resume", "revoke-finish", "approve-decline"], weights=[3, 2, 2, 3])[0]
    home = rng.choice(["a", "b", "c"])  # not the agent's home: it runs no command
    account, token = world.account_of(home)
    op = {"index": len(world.ops), "kind": "race", "home": home, "argv": [variant], "start": time.time(), "end": None, "exit": None}
    world.ops.append(op)
    if account is None:
        op["exit"], op["end"] = "no account", time.time()
        return
    # No more than two processes on one home, as for the customers' own operations.
    if sum(1 for r in world.running if r.home == home) >= 2:
        world.reap(wait_for=next(r for r in world.running if r.home == home))
    if variant == "approve-decline":
        row = stores.first_deferred(world, account)
        if row is None:
            # Ask first (the answer comes at once: the request is only recorded).
            # Of something the account does not hold: a request for what it owns is answered as owned.
            held = world.held(account)
            asked = world.launch("buy-defer", home, ["buy", rng.choice([id for id in BOOKS + ISSUES + LARGE if id not in held] or BOOKS),
                                                    "--payment", "defer"])
            world.reap(wait_for=world.running[-1])
            row = world.wait_for(lambda: stores.first_deferred(world, account), 2)
            if row is None:
                op["exit"], op["end"] = f"nothing pending (op {asked['index']} asked)", time.time()
                return
        actions = ["approve", "decline"]
    else:
        # Best a purchase whose delivery is under way (not finished yet); else any standing one.
        held = world.held(account)
        fresh = [id for id in LARGE + ISSUES[2:] + BOOKS if id not in held]
        row = None
        if fresh:
            product = rng.choice(fresh)
            world.launch("buy-large" if product in LARGE else "buy-book", home, ["buy", product])
            row = world.wait_for(lambda: next(iter(stores.standing_purchases(world, account, product)), None), 5)
        if row is None:
            rows = stores.standing_purchases(world, account)
            if not rows:
                op["exit"], op["end"] = "nothing to race over", time.time()
                return
            row = rng.choice(rows)
        actions = [variant.split("-")[0], variant.split("-")[1]]
    target, product = row["id"], row["productId"]
    op["argv"] = [variant, target, product]
    outcomes = {}
    barrier = threading.Barrier(2)

    def act(action):
        barrier.wait()
        if action in ("refund", "revoke"):
            outcomes[action] = world.server.admin("POST", f"/v1/admin/transactions/{target}/{action}", {"reason": "torture race"})[0]
        elif action in ("approve", "decline"):
            outcomes[action] = world.server.admin("POST", f"/v1/admin/transactions/{target}/{action}")[0]
        elif action == "finish":
            outcomes[action] = http(f"{world.server.url}/v1/transactions/{target}/finish", "POST", token)[0]
        else:
            outcomes[action] = f"op {world.launch('resume', home, ['resume'])['index']}"

    threads = [threading.Thread(target=act, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    op["race"] = dict(outcomes)
    op["exit"] = ", ".join(f"{action} {outcomes.get(action, 'no answer')}" for action in actions)
    op["end"] = time.time()
