"""The world the history runs in: a fenced folder with the store's files, the server's data, four
client homes (b on a small tmpfs when run as root) and the fault proxy in front of the server; the
clients it launches and reaps, and the state the driver, the faults and the checker share."""
import json, os, random, shutil, subprocess, tempfile, time
from collections import Counter, defaultdict
from pathlib import Path

from . import channel_subscriptions, channels, stores, updates
from .common import BOOKS, ISSUES, AGENT_HOME, CLAIM_LEASE, FILE_UPDATES, LARGE, MIB, PREMIUM, ROOT, SUBSCRIPTION, UPDATE_FAULTS, UPDATES, http, log
from .postgres import PostgresCluster
from .proxy import FaultProxy
from .published import Published
from .server import Server


class Running:
    def __init__(self, index, home, argv, process, started):
        self.index, self.home, self.argv, self.process, self.started = index, home, argv, process, started


class World:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.kiosk = args.kiosk
        self.work = Path(tempfile.mkdtemp(prefix=f"kiosk-torture-{args.seed}-", dir=args.work))
        # Everything the run writes lives under the fence; the checker finds anything out of place.
        self.fence = self.work / "fence"
        self.store = self.fence / "store"
        self.server_data = self.fence / "server-data"
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True)
        self.disk = None
        self.homes = {}
        self.proxy = None
        self.server = Server(self)
        self.running = []
        self.ops = []            # dicts: index, kind, home, argv, start, end, exit
        self.faults = []         # dicts: index, kind, time, detail (faults the driver carried out itself)
        self.armed = []          # proxy faults waiting for a request to land on
        self.filler_until = None
        self.sizes = {}
        self.credentials = {}    # home → (account id, account token)
        self.postgres = PostgresCluster(self.work / "postgres", self.logs) if args.engine == "postgres" else None
        # Updates: every archive version the catalog named for each product, in order, each archive
        # kept (hard-linked) in published/ for the checker, whatever the server removes later.
        self.update_rng = random.Random(args.seed * 7919 + 2)
        self.versions = defaultdict(list)
        self.published = Published(self.work / "published")
        self.update_faults = []  # UPDATE_FAULTS still to take in this round
        self.update_serial = 0
        self.update_landed = Counter()  # UPDATE_FAULTS → scenarios where it landed on an update in flight
        self.file_landed = Counter()    # the same, of scenarios aimed at a publication file's update by chunks
        # The update faults this run can aim (disk-full needs home b's tmpfs).
        self.update_fault_kinds = [f for f in UPDATE_FAULTS if f != "disk-full" or os.geteuid() == 0]
        self.editions_used = {}  # publication file → every (seed, revised chapter) published
        self.editions = {}       # publication file → (seed, revised chapter) of the edition its file holds now
        # (home, publication file) → [(time, version)] the home's library named then, read whenever a
        # process of the home ends and at every step of the history: what its installed file was
        # cut from when it updated by chunks (checks/chunked.py).
        self.installed_seen = defaultdict(list)
        self.hand_edits = []     # dicts: home, product, time, until, offset, version (publication files edited by hand)
        self.quiet = False       # the history is over: the sandbox clock runs at real speed
        self.agent = None        # the `kiosk agent` process of AGENT_HOME
        self.agent_starts = 0
        self.agent_settled = None  # seconds the agent took, after the history, to hold everything
        self.withdrawn = set()   # products taken out of the catalog files now
        self.tree_failures = []  # (message, home, product) of trees checked during the history
        self.trees_checked = Counter()  # "during" / "final" → trees compared with their published archive
        self.play_keys = None    # the Play app's key pair (channels.py)
        self.channel_threads = []  # deliveries a channel keeps sending in the background
        self.channel_subs = {}     # subscriptions sold through a channel, and what each was told (channel_subscriptions.py)
        self.google = None         # the service account's and Google's push keys (channel_subscriptions.py)
        self.play_api = None       # the stand-in for Google's token endpoint and Android Publisher API
        self.play_standin = None
        self.channel_withdrawals = []  # when the store took a channel's refund or dispute (a revocation)

    def database_flags(self):
        return ["--database", self.postgres.url] if self.postgres else []

    # Setup ---------------------------------------------------------------------------------

    def build_store(self):
        shutil.copytree(ROOT / "Catalog", self.store / "Catalog")
        shutil.copytree(ROOT / "Content", self.store / "Content")
        content_rng = random.Random(self.args.seed * 7919 + 1)
        books = json.loads((self.store / "Catalog/books.json").read_text())
        for id, megabytes in zip(LARGE, self.args.large):
            name = id.rsplit(".", 1)[-1]
            folder = self.store / "Content/books" / name
            folder.mkdir(parents=True)
            with open(folder / "plates.bin", "wb") as out:
                for _ in range(megabytes):
                    out.write(content_rng.randbytes(MIB))
            (folder / "edition.md").write_text("edition 0\n")
            book = dict(books["products"][0], id=id, title=f"Atlas {name}", creditPrice=6, content={"path": f"books/{name}", "format": "zip"})
            books["products"].append(book)
            self.sizes[id] = megabytes
        # The update products: many small entries in a few folders, half of them text.
        for id in UPDATES:
            name = id.rsplit(".", 1)[-1]
            folder = self.store / "Content/books" / name
            for n in range(self.args.update_entries):
                (folder / f"part-{n % 4}").mkdir(parents=True, exist_ok=True)
                (folder / f"part-{n % 4}" / f"page-{n:03d}.bin").write_bytes(updates.entry_bytes(self))
            books["products"].append(dict(books["products"][0], id=id, title=f"Field {name}", creditPrice=2,
                                          content={"path": f"books/{name}", "format": "zip"}))
        # The publication files: an EPUB each, sold as the file itself and updated by chunks.
        for id in FILE_UPDATES:
            name = id.rsplit(".", 1)[-1]
            path = self.store / "Content/publications" / f"{name}.epub"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.editions[id] = (self.args.seed % 1000 + 1, 0)
            updates.write_edition(self, id, path)
            books["products"].append(dict(books["products"][0], id=id, title=f"Harbor {name}", creditPrice=3,
                                          content={"path": f"publications/{name}.epub", "format": "epub"}))
            self.published.files[id] = path.name
        (self.store / "Catalog/books.json").write_text(json.dumps(books, indent=2))
        # The subscription's issue is large too, and a tar.gz: both formats cross the faults.
        with open(self.store / "Content/magazines/harbor-monthly/issue-03/plates.bin", "wb") as out:
            for _ in range(self.args.issue):
                out.write(content_rng.randbytes(MIB))
        channels.prepare_store(self)
        channel_subscriptions.prepare(self)
        self.add_premium_plan()
        self.catalog = {}
        for file in (self.store / "Catalog").glob("*.json"):
            for product in json.loads(file.read_text())["products"]:
                self.catalog[product["id"]] = product

    def make_homes(self):
        homes = self.fence / "homes"
        homes.mkdir()
        names = ["a", "a2", "b", "c"]
        for name in names:
            self.homes[name] = homes / name
        if os.geteuid() == 0:
            # B lives on a small tmpfs so that its disk can be filled.
            self.disk = self.fence / "disk"
            self.disk.mkdir()
            size = 2 * (sum(self.args.large) + self.args.issue) + 96
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m", "tmpfs", str(self.disk)], check=True)
            self.homes["b"] = self.disk / "b"
        else:
            log("torture: not root, so no tmpfs: the full-disk fault is left out of this run")
        self.proxy = FaultProxy(names)

    def env(self, home):
        return {**os.environ, "KIOSK_HOME": str(self.homes[home]), "KIOSK_SERVER": self.proxy.url(home),
                "KIOSK_STALL_SECONDS": "2", "KIOSK_MAX_RECEIVE_SPEED": str(self.args.speed * MIB),
                "KIOSK_RETRY_BASE_SECONDS": "0.5", "KIOSK_RETRY_CAP_SECONDS": "4", "KIOSK_CLAIM_LEASE_SECONDS": str(CLAIM_LEASE),
                "KIOSK_LOG_LEVEL": "error", "KIOSK_POWER_SUPPLY_DIR": str(self.power)}

    @property
    def power(self):
        """The devices' battery (faults.battery drains it under the agent's policy floor)."""
        return self.work / "power_supply"

    def set_battery(self, percent, status):
        battery = self.power / "BAT0"
        battery.mkdir(parents=True, exist_ok=True)
        for name, value in (("type", "Battery"), ("capacity", str(percent)), ("status", status)):
            (battery / name).write_text(value + "\n")

    def run_now(self, home, argv, timeout=600):
        result = subprocess.run([self.kiosk, *argv], env=self.env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        with open(self.logs / f"setup-{home}.log", "a") as out:
            out.write(f"$ kiosk {' '.join(argv)}  → {result.returncode}\n{result.stdout}{result.stderr}")
        return result

    def link_second_device(self):
        self.run_now("a", ["sync"])
        # Looking at an account creates none (kiosk account on a fresh home says so): the
        # account of a and a2 is made on the store and linked on both devices.
        status, created = http(self.server.url + "/v1/accounts", "POST", None, {})
        assert status in (200, 201) and created, f"the store did not create an account: {status}"
        for home in ("a", "a2"):
            self.run_now(home, ["account", "link", created["token"]])
        for home in ("b", "c"):
            self.run_now(home, ["sync"])
        # The update products installed before the history begins (a2 has a's through restore),
        # so that the history's new versions find them installed. (The purchases make b's and c's
        # accounts, read below while their databases can be.)
        updates.note_published(self)
        for home, ids in (("a", UPDATES + FILE_UPDATES), ("b", UPDATES[:1] + FILE_UPDATES), ("c", UPDATES[1:] + FILE_UPDATES)):
            for id in ids:
                self.run_now(home, ["buy", id])
        self.run_now("a2", ["restore"])
        # B subscribes: the history's changes of plan move its subscription up and down.
        self.run_now("b", ["buy", SUBSCRIPTION, "--no-download"])
        for home in self.homes:
            self.account_of(home)
        self.note_installed()
        self.make_codes()
        # The agent's device charges: its policy (a battery floor, faults.battery) lets it download.
        self.set_battery(90, "Charging")
        self.start_agent()

    def add_premium_plan(self):
        """The subscription at level 2 and a premium plan of its group at level 1 (issue 65): the
        history upgrades to it (at once, the monthly's unused part credited) and back (at renewal)."""
        file = self.store / "Catalog/magazines.json"
        document = json.loads(file.read_text())
        for product in list(document["products"]):
            if product["id"] == SUBSCRIPTION:
                product["planLevel"] = 2
                premium = dict(product, id=PREMIUM, title="Harbor Monthly Premium", price="4.99", planLevel=1)
                premium.pop("playProductId", None)
                document["products"].append(premium)
        file.write_text(json.dumps(document, indent=2))

    def make_codes(self):
        """Offer codes the history's readers redeem, each several times over and at once: three
        one-time codes for a book and one custom code two accounts may redeem, for an issue; and
        codes used when buying: two one-time codes taking 30 % off a book, one custom code taking
        0.50 off it that three accounts may use."""
        self.codes, self.discount_codes = [], []
        for body in ({"productId": BOOKS[1], "count": 3}, {"productId": ISSUES[0], "code": "TORTURE-2026", "limit": 2}):
            status, made = self.server.admin("POST", "/v1/admin/codes", body)
            assert status == 201 and made, f"the store made no codes: {status}"
            self.codes += made["codes"]
        for body in ({"productId": BOOKS[2], "count": 2, "benefit": {"kind": "percentOff", "value": 30}},
                     {"productId": BOOKS[2], "code": "HALF-A-DOLLAR", "limit": 3, "benefit": {"kind": "amountOff", "value": 50}}):
            status, made = self.server.admin("POST", "/v1/admin/codes", body)
            assert status == 201 and made, f"the store made no discount codes: {status}"
            self.discount_codes += made["codes"]

    def start_agent(self):
        out = open(self.logs / f"agent-{self.agent_starts}.log", "w")
        self.agent = subprocess.Popen([self.kiosk, "agent", "--sync-interval", "600"], env=self.env(AGENT_HOME), stdout=out, stderr=subprocess.STDOUT)
        self.agent_starts += 1

    # Operations ----------------------------------------------------------------------------

    def launch(self, kind, home, argv):
        index = len(self.ops)
        out = open(self.logs / f"op-{index:04d}-{kind}.log", "w")
        out.write(f"$ kiosk {' '.join(argv)}   (home {home})\n")
        out.flush()
        process = subprocess.Popen([self.kiosk, *argv], env=self.env(home), stdout=out, stderr=subprocess.STDOUT)
        op = {"index": index, "kind": kind, "home": home, "argv": argv, "start": time.time(), "end": None, "exit": None}
        self.ops.append(op)
        self.running.append(Running(index, home, argv, process, time.time()))
        return op

    def reap(self, wait_for=None, timeout=240):
        """Collects finished client processes; waits for `wait_for` (a Running), or for all when 'all'."""
        deadline = time.time() + timeout
        while True:
            for run in list(self.running):
                code = run.process.poll()
                if code is not None:
                    self.running.remove(run)
                    op = self.ops[run.index]
                    op["end"], op["exit"] = time.time(), code
                    self.note_installed(run.home)
            pending = [r for r in self.running if wait_for == "all" or r is wait_for]
            if not pending:
                return
            if time.time() > deadline:
                for run in pending:
                    self.ops[run.index]["hung"] = True
                    run.process.kill()
                deadline = time.time() + 30
            time.sleep(0.05)

    def note_installed(self, *homes):
        """Notes the version of each publication file the homes' libraries name now, or that they
        name none (a revocation took it out: what is downloaded after is no update); nothing is
        noted when a home's database cannot be read (its disk is full)."""
        for home in homes or self.homes:
            for id in FILE_UPDATES:
                when = time.time()
                version = stores.installed_version(self, home, id)
                if version is not None:
                    self.installed_seen[(home, id)].append((when, version))

    def account_of(self, home):
        """(account id, account token) of a home, read from its own settings once: they never change
        after setup, and home b's database cannot be opened while its disk is full."""
        if home not in self.credentials:
            settings = stores.home_settings(self, home)
            if not settings.get("account.id"):
                return None, None
            self.credentials[home] = settings["account.id"], settings.get("account.token")
        return self.credentials[home]

    def held(self, account):
        """The books and issues an account holds by a standing purchase, as the store says."""
        return stores.held_products(self, account)

    def wait_for(self, read, seconds):
        """What `read()` gives (a row of the store's database) once it is something, polled for up
        to `seconds`; else None."""
        deadline = time.time() + seconds
        while True:
            row = read()
            if row or time.time() > deadline:
                return row
            time.sleep(0.1)

    def cleanup(self, keep):
        for run in self.running:
            run.process.kill()
        if self.agent and self.agent.poll() is None:
            self.agent.kill()
        self.server.stop()
        channel_subscriptions.stop(self)
        if self.postgres:
            self.postgres.stop()
        if self.disk and keep:
            # The tmpfs goes with the unmount: keep a copy of home B for inspection.
            shutil.copytree(self.disk, self.work / "disk-copy", symlinks=True, dirs_exist_ok=True)
        if self.disk:
            subprocess.run(["umount", "-l", str(self.disk)], check=False)
        if not keep:
            shutil.rmtree(self.work, ignore_errors=True)

