"""The one reader of the stores: the server's database (SQLite in its data folder, or PostgreSQL
through `psql`), each home's SQLite database and folders, and the publisher's content files.

The driver and the checker ask their questions here; no other module of the package writes SQL,
names a table or a column, or walks a home's folders. Both schemas (the server's and the client's)
are therefore read in this one file: a renamed column breaks here, loudly, not in a check that
would then quietly see nothing. Every connection is read-only. Server queries quote every
identifier (the schema's names are camelCase, which PostgreSQL folds to lower case unless quoted),
so one query runs on both engines, and timestamps come back as seconds since 1970 on both."""
import datetime, hashlib, json, os, sqlite3
from collections import Counter

from .rules import states

# The server's timestamp columns: REAL seconds since 1970 on SQLite, TIMESTAMPTZ on PostgreSQL. The
# checker compares them as numbers, so PostgreSQL's are turned into the same seconds.
TIMESTAMP_COLUMNS = {"purchaseDate", "expiresDate", "finishedAt", "createdAt", "revokedAt", "retiredAt", "appliedAt", "startsAt", "endsAt"}


def quoted(values):
    """A SQL list of text literals: ('a', 'b')."""
    return "(" + ", ".join("'" + value.replace("'", "''") + "'" for value in values) + ")"


# ---------------------------------------------------------------------------------------------
# Connections


class PostgresRow(dict):
    """A row read through psql: by column name like sqlite3.Row, and by position."""

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


class PostgresRows(list):
    def fetchall(self):
        return list(self)

    def fetchone(self):
        return self[0] if self else None


class PostgresReader:
    """What the readers below need of a sqlite3 connection (execute, fetchall, fetchone, `with`),
    over one `psql` per query: each row comes back as one line of JSON, so numbers stay numbers and
    NULL stays None; timestamps become seconds since 1970 as on SQLite."""

    def __init__(self, cluster):
        self.cluster = cluster

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False

    def execute(self, sql, parameters=()):
        assert not parameters, "psql queries take no parameters"
        wrapped = f"SELECT row_to_json(q) FROM ({sql}) q"
        output = self.cluster.psql(wrapped)
        rows = PostgresRows()
        for line in output.splitlines():
            if not line.strip():
                continue
            row = PostgresRow()
            for column, value in json.loads(line).items():
                if column in TIMESTAMP_COLUMNS and isinstance(value, str):
                    value = datetime.datetime.fromisoformat(value).timestamp()
                row[column] = value
            rows.append(row)
        return rows


def server_db(world):
    """The store's database, read-only: SQLite's file, or the run's PostgreSQL cluster."""
    if world.postgres:
        return PostgresReader(world.postgres)
    connection = sqlite3.connect(f"file:{world.server_data / 'kiosk-server.sqlite'}?mode=ro", uri=True, timeout=30)
    connection.row_factory = sqlite3.Row
    return connection


def home_db(world, home):
    connection = sqlite3.connect(f"file:{world.homes[home] / 'kiosk.sqlite'}?mode=ro", uri=True, timeout=30)
    connection.row_factory = sqlite3.Row
    return connection


# ---------------------------------------------------------------------------------------------
# The server's database: what the driver asks during the history


def refundable(world):
    """IDs of the standing purchases of books, issues and subscriptions, oldest first (credit packs
    keep the balance check exact: a refund takes back only what is left of their credits)."""
    with server_db(world) as db:
        return [r[0] for r in db.execute('''SELECT "id" FROM "storeTransaction" WHERE "status" = 'purchased' AND "kind" IN ('nonConsumable', 'subscription') ORDER BY "sequence"''').fetchall()]


def held_products(world, account):
    """The books and issues an account holds by a standing purchase, as the store says."""
    with server_db(world) as db:
        return {r["productId"] for r in db.execute(
            f"""SELECT "productId" FROM "storeTransaction" WHERE "accountId" = '{account}' AND "status" = 'purchased' AND "kind" = 'nonConsumable'""")}


def first_deferred(world, account):
    """The account's oldest Ask to Buy still waiting (a row with id and productId), or None."""
    with server_db(world) as db:
        return db.execute(f'''SELECT "id", "productId" FROM "storeTransaction" WHERE "accountId" = '{account}' AND "status" = 'deferred' ORDER BY "sequence"''').fetchone()


def standing_purchases(world, account, product=None):
    """The account's standing purchases of books, issues and subscriptions that were paid or
    redeemed (not free re-buys), as rows with id and productId: of `product` newest first, else all
    oldest first."""
    sql = f"""SELECT "id", "productId" FROM "storeTransaction" WHERE "accountId" = '{account}' AND "status" = 'purchased'
        AND "kind" IN ('nonConsumable', 'subscription') AND "paymentMethod" <> 'owned'"""
    sql += f""" AND "productId" = '{product}' ORDER BY "sequence" DESC""" if product else ' ORDER BY "sequence"'
    with server_db(world) as db:
        return db.execute(sql).fetchall()


def channel_subscriptions(world, channel=None, subscription_id=None):
    """The subscriptions a channel renews (Stripe's, Play's): channel, channelSubscriptionId,
    originalTransactionId, accountId, state, autoRenew, expiresDate; one, when named."""
    where = '"channel" IS NOT NULL'
    if channel:
        where += f' AND "channel" IN {quoted([channel])} AND "channelSubscriptionId" IN {quoted([subscription_id])}'
    with server_db(world) as db:
        return [dict(r) for r in db.execute(f'''SELECT "channel", "channelSubscriptionId", "originalTransactionId", "accountId", "state",
            "autoRenew", "expiresDate" FROM "subscription" WHERE {where}''').fetchall()]


def account_transactions(world, account):
    with server_db(world) as db:
        return [dict(r) for r in db.execute(f"""SELECT * FROM "storeTransaction" WHERE "accountId" = '{account}'""")]


def grace_windows(world, account=None):
    """The billing grace windows the store recorded (of one account, or all), each with the
    subscription's product: accountId, productId, startsAt, endsAt."""
    where = f"""WHERE g."accountId" = '{account}'""" if account else ""
    with server_db(world) as db:
        return [dict(r) for r in db.execute(f'''SELECT g."accountId", s."productId", g."startsAt", g."endsAt" FROM "subscriptionGrace" g
            JOIN "subscription" s ON s."originalTransactionId" = g."originalTransactionId" {where} ORDER BY g."id"''')]


# ---------------------------------------------------------------------------------------------
# A home's database: what the driver asks during the history


def home_settings(world, home):
    """The home's account settings: account.id and account.token (absent before it has one)."""
    with home_db(world, home) as db:
        return {r["key"]: r["value"] for r in db.execute("SELECT key, value FROM setting WHERE key IN ('account.id', 'account.token')")}


def installed_file(world, home, product):
    """The one file of an installed publication (Library/<id>/<name>), or None."""
    folder = world.homes[home] / "Library" / product
    files = [p for p in folder.iterdir() if p.is_file() and not p.is_symlink()] if folder.is_dir() else []
    return files[0] if len(files) == 1 else None


NOT_INSTALLED = ""


def installed_version(world, home, product):
    """The archive SHA-256 of `product` the home's library names, NOT_INSTALLED when it names none,
    or None when the home's database cannot be read now."""
    try:
        with home_db(world, home) as db:
            row = db.execute("SELECT sha256 FROM libraryItem WHERE productId = ?", (product,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else NOT_INSTALLED


def removed_downloads(world, home):
    """The products whose files the newsstand's tidy or the reader removed on a home (still owned)."""
    with home_db(world, home) as db:
        return [r["productId"] for r in db.execute("SELECT productId FROM download WHERE state = 'removed' ORDER BY productId")]


def agent_progress(world, home):
    """What a home holds now: (transactions held settled, how many payments are not settled,
    products installed → the archive SHA-256 installed, downloads not installed). Raises
    sqlite3.Error when it cannot be read."""
    with home_db(world, home) as db:
        held = {r["transactionId"] for r in db.execute(f"SELECT transactionId FROM payment WHERE state IN {quoted(states.SETTLED)}")}
        unsettled = db.execute(f"SELECT COUNT(*) FROM payment WHERE state IN {quoted(states.UNSETTLED)}").fetchone()[0]
        installed = {r["productId"]: r["sha256"] for r in db.execute("SELECT productId, sha256 FROM libraryItem")}
        downloads = db.execute("SELECT COUNT(*) FROM download WHERE state != 'installed'").fetchone()[0]
    return held, unsettled, installed, downloads


# ---------------------------------------------------------------------------------------------
# Folders


def tree(folder):
    """Relative path → SHA-256 (files) or '<dir>' / '<link>' of everything under a folder."""
    result = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        if path.is_symlink():
            result[relative] = "<link>"
        elif path.is_dir():
            result[relative] = "<dir>"
        else:
            result[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result


def installed_tree(world, home, product):
    """The tree of `product` in the home's Library/ (empty when there is no such folder)."""
    folder = world.homes[home] / "Library" / product
    return tree(folder) if folder.is_dir() else {}


def content_tree(world, product):
    """The tree of the content the publisher's files hold now for `product`: a folder's, or for a
    publication file (delivered as the file itself) its one file under its own name."""
    source = world.store / "Content" / world.catalog[product]["content"]["path"]
    if source.is_file():
        return {source.name: hashlib.sha256(source.read_bytes()).hexdigest()}
    return tree(source)


def fence_entries(world):
    """What the fenced folder holds at its top."""
    return list(world.fence.iterdir())


def home_parents_entries(world):
    """What the folders the homes live in hold (homes/, and home b's disk when it has one)."""
    return [entry for parent in [world.fence / "homes"] + ([world.disk] if world.disk else []) for entry in parent.iterdir()]


# ---------------------------------------------------------------------------------------------
# What the checker reads, once, after quiescence


class ServerStore:
    """The store's rows: transactions, ledger entries, account balances, grace windows and the
    subscriptions a channel renews."""

    def __init__(self, transactions, ledger, balances, grace, channel_subscriptions=(), codes=(), redemptions=(), subscriptions=()):
        self.transactions, self.ledger, self.balances, self.grace = transactions, ledger, balances, grace
        self.codes, self.redemptions, self.subscriptions = list(codes), list(redemptions), list(subscriptions)
        self.channel_subscriptions = list(channel_subscriptions)
        self.by_id = {t["id"]: t for t in transactions}
        self.charges = Counter(e["transactionId"] for e in ledger if e["kind"] == "charge")
        self.refunds = Counter(e["transactionId"] for e in ledger if e["kind"] == "refund")


def read_server(world):
    with server_db(world) as db:
        transactions = [dict(r) for r in db.execute('SELECT * FROM "storeTransaction" ORDER BY "sequence"')]
        ledger = [dict(r) for r in db.execute('SELECT * FROM "ledgerEntry" ORDER BY "id"')]
        balances = {r["id"]: r["credits"] for r in db.execute('SELECT "id", "credits" FROM "account"')}
        codes = [dict(r) for r in db.execute('SELECT "id", "redemptionLimit", "redeemed", "benefit" FROM "offerCode"')]
        redemptions = [dict(r) for r in db.execute('SELECT "codeId", "accountId", "transactionId" FROM "offerCodeRedemption"')]
        subscriptions = [dict(r) for r in db.execute('SELECT "originalTransactionId", "accountId", "productId", "state", "pendingProductId" FROM "subscription"')]
    return ServerStore(transactions, ledger, balances, grace_windows(world), channel_subscriptions(world), codes, redemptions, subscriptions)


class HomeStore:
    """One home as the checker sees it: its account, its rows (payments, library items, downloads)
    and what its folders hold."""

    def __init__(self, world, name):
        self.world, self.name, self.root = world, name, world.homes[name]
        with home_db(world, name) as db:
            row = db.execute("SELECT value FROM setting WHERE key = 'account.id'").fetchone()
            self.account = row[0] if row else None
            self.payments = [dict(r) for r in db.execute("SELECT * FROM payment ORDER BY id")]
            self.library = {r["productId"]: dict(r) for r in db.execute("SELECT * FROM libraryItem ORDER BY productId")}
            self.downloads = [dict(r) for r in db.execute("SELECT * FROM download")]

    def library_folders(self):
        """Product folders in Library/ (not the hidden staging ones)."""
        library = self.root / "Library"
        return {p.name for p in library.iterdir() if not p.name.startswith(".")} if library.exists() else set()

    def installed_tree(self, product):
        return installed_tree(self.world, self.name, product)

    def partial_files(self):
        """Names in downloads/ (partial files)."""
        return [p.name for p in (self.root / "downloads").glob("*")]

    def staging_folders(self):
        """Names of hidden entries in Library/ (staging folders of installs and updates)."""
        return [p.name for p in (self.root / "Library").glob(".*")]

    def entries(self):
        """Names at the home's top."""
        return [entry.name for entry in self.root.iterdir()]

    def manifest_entries(self):
        """(name, whether it is a plain file) of each entry in manifests/."""
        manifests = self.root / "manifests"
        return [(entry.name, entry.is_file() and not entry.is_symlink()) for entry in manifests.iterdir()] if manifests.is_dir() else []

    def links_out(self):
        """(path, target) of each link in Library/ that points outside its product's folder."""
        library = self.root / "Library"
        found = []
        for product in library.iterdir() if library.exists() else []:
            for path in product.rglob("*"):
                if path.is_symlink():
                    target = os.path.realpath(path)
                    if not target.startswith(str(product.resolve()) + os.sep):
                        found.append((path, target))
        return found


def read_homes(world):
    return {home: HomeStore(world, home) for home in world.homes}
