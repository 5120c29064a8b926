#!/usr/bin/env python3
"""make torture: a seeded random history of purchases and downloads under faults, then a checker.

One `kiosk serve` and four client homes (A, A's second device, B on a small tmpfs when this runs as
root, C) live in a fenced folder. Every client talks to the server through a fault proxy (one port
per home) that forwards one request per connection and can reset or freeze a connection mid-body, or
drop an answer after the server gave it. The driver runs OPS random operations (purchases of every
kind, redemptions, Ask to Buy answered by the admin, refunds, restores, pauses, cancels, resumes,
two processes on one home at once, and races of an operator's action against a customer's or
another operator's on one transaction) and, between them, random faults (SIGKILL of a client, SIGSTOP of
a downloading client past its claim's lease while another process takes the download over, SIGKILL
and restart of the server, cut and stalled connections, lost answers, a catalog reload that changes
content in flight, a full disk). At evenly spaced points an update scenario publishes a new version
of a zip product of many small entries while homes update to it by entries, and aims a fault at
that update (the client killed mid-range and resumed, the range cut, the server restarted, the
version replaced again, an installed file edited by hand). Then every home is driven to quiescence and the checker compares what the
server's database and each home's database and folders believe, and every installed tree with
the published archive of the version its home names, byte for byte. It prints one table; the
run fails (exit 1) when any count in it is not 0, printing the seed and the operations and faults
that touched what broke, and keeping the folder for inspection.

The store's database is SQLite in the server's data folder, or (--engine postgres) a throwaway
PostgreSQL cluster the run starts in its own folder and stops at the end; the checker reads the same
tables from either.

    python3 scripts/torture.py --seed 7 --ops 300        (or: make torture SEED=7 OPS=300)
    python3 scripts/torture.py --engine postgres         (or: make torture ENGINE=postgres)
"""
import argparse, asyncio, datetime, glob, hashlib, json, os, pwd, random, shutil, signal, socket, sqlite3
import struct, subprocess, sys, tarfile, tempfile, threading, time, urllib.error, urllib.request, zipfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

BOOKS = ["com.kiosk.books.lighthouse-keeper", "com.kiosk.books.river-of-maps", "com.kiosk.books.small-engines"]
ISSUES = [f"com.kiosk.magazines.harbor-monthly.issue-0{n}" for n in (1, 2, 3)]
SUBSCRIPTION = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
PACKS = {"com.kiosk.credits.pack-5": 5, "com.kiosk.credits.pack-10": 10}
# Large books added to the bundled store so that faults land mid-transfer.
LARGE = ["com.kiosk.books.atlas-north", "com.kiosk.books.atlas-south"]
# Zip products of many small entries that get new versions published during the history (two entries
# changed, one removed, one added each time): installed products are updated by entries, under
# faults aimed at the update (see World.update_op).
UPDATES = ["com.kiosk.books.field-notes", "com.kiosk.books.tide-tables"]
# What each update scenario does to the update in flight, taken in turn (shuffled each round).
UPDATE_FAULTS = ["client-kill", "cut-range", "server-kill", "replace", "hand-edit", "takeover"]
# The sandbox's clock during the history: a 30-day month in a minute, so subscriptions renew
# several times while the history runs (the store's own worker charges them).
TIME_SCALE = 43200
# Home a2 takes no command that would deliver for it: `kiosk agent` alone brings it what the
# account gets elsewhere (a's purchases, renewals, approvals) and takes away what is revoked.
AGENT_HOME = "a2"

# Seconds a client's download claim lasts without renewal (the client's default is 15): short, so
# that a suspended owner's claim lapses within the client-stop fault.
CLAIM_LEASE = 2


def log(line):
    print(line, flush=True)


def http(url, method, token, body=None, timeout=30):
    """One request with a bearer token: (status, decoded JSON answer or None); a request that got
    no answer at all gives its error as the status."""
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, None
    except (urllib.error.URLError, OSError) as error:
        return f"no answer ({error})", None


def free_disk(path):
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


# ---------------------------------------------------------------------------------------------
# The fault proxy


class Fetch:
    """One content request as the proxy saw it: `kind` is "archive" (a download of the whole archive,
    or its resume with If-Range), "entries" (a byte range of an update by entries: Range without
    If-Range) or "manifest"; `version` is the archive SHA-256 the client asked for."""

    def __init__(self, home, product, range_start, if_range, kind="archive", version=None):
        self.home, self.product, self.range_start, self.if_range = home, product, range_start, if_range
        self.kind, self.version = kind, version
        self.hold_at, self.held, self.hold_limit = None, False, 0.0
        self.status, self.etag, self.start, self.length = None, None, 0, None
        self.bytes, self.end, self.opened, self.closed = 0, "open", time.time(), None
        self.cut = False
        self.stall_until = 0.0
        self.faulted = False


class FaultProxy:
    """HTTP/1.1 proxy with one listening port per home. Each client connection carries one request
    (`Connection: close` both ways), so every content response is one connection the driver can
    reset (RST, as a dropped network does) or freeze, and whose bytes it counts."""

    def __init__(self, homes):
        self.upstream = None
        self.fetches = []
        self.active = set()
        self.armed = []          # faults waiting for the next matching request: ("cut", bytes) ...
        self.targeted = []       # faults for the next entries range of one home and product: dicts
        self.fired = []          # (time, kind, detail) of faults the proxy carried out
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.ports = {}
        started = threading.Event()

        async def start():
            for home in homes:
                server = await asyncio.start_server(lambda r, w, h=home: self.handle(h, r, w), "127.0.0.1", 0, limit=1 << 20)
                self.ports[home] = server.sockets[0].getsockname()[1]
            started.set()

        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.create_task(start())
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        started.wait(10)

    def url(self, home):
        return f"http://127.0.0.1:{self.ports[home]}"

    # Faults, called from the driver's thread.
    def cut_active(self):
        with self.lock:
            streams = [f for f in self.active if f.end == "open"]
            for fetch in streams:
                fetch.cut = True
            return len(streams)

    def stall_active(self, seconds):
        with self.lock:
            streams = [f for f in self.active if f.end == "open"]
            for fetch in streams:
                fetch.stall_until = time.time() + seconds
                fetch.faulted = True
                self.fired.append((time.time(), "stall", f"{fetch.home} {fetch.product} at {fetch.bytes}"))
            return len(streams)

    def freeze_home(self, home):
        """Marks a home's open content responses as ended by a fault: their client was suspended, so
        they linger while another process of the home takes the download over."""
        with self.lock:
            streams = [f for f in self.active if f.end == "open" and f.home == home]
            for fetch in streams:
                fetch.faulted = True
            return len(streams)

    def downloading_homes(self):
        with self.lock:
            return {f.home for f in self.active if f.end == "open" and f.status in (200, 206)}

    def arm(self, kind, value):
        with self.lock:
            self.armed.append((kind, value))

    def arm_entries(self, home, product, kind, at, skip=0):
        """A fault for an entries range `home` asks of `product`'s archive, the first after `skip`
        others: "cut" resets it after `at` bytes of its body; "hold" stops forwarding it after `at`
        bytes until `release`."""
        with self.lock:
            self.targeted.append({"home": home, "product": product, "kind": kind, "at": at, "skip": skip})

    def disarm_entries(self, home, product):
        """Takes back what arm_entries armed and never landed; returns how many."""
        with self.lock:
            left = [t for t in self.targeted if (t["home"], t["product"]) == (home, product)]
            self.targeted = [t for t in self.targeted if t not in left]
            return len(left)

    def holding(self, home, product):
        """The held entries response of `home` for `product`, if one is held now."""
        with self.lock:
            return next((f for f in self.active if f.held and (f.home, f.product) == (home, product)), None)

    def release(self, home, product):
        with self.lock:
            for fetch in self.active:
                if (fetch.home, fetch.product) == (home, product):
                    fetch.hold_at, fetch.held = None, False

    def disarm(self):
        with self.lock:
            self.armed.clear()
            self.targeted.clear()
            for fetch in self.active:
                fetch.stall_until = 0
                fetch.hold_at, fetch.held = None, False

    def _take(self, kinds):
        with self.lock:
            for index, (kind, value) in enumerate(self.armed):
                if kind in kinds:
                    del self.armed[index]
                    return kind, value
        return None

    async def handle(self, home, reader, writer):
        fetch = None
        upstream_writer = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
            fields = {name.strip().lower(): value.strip() for name, value in headers}
            body = await reader.readexactly(int(fields.get("content-length", "0")))
            path, _, query = target.partition("?")
            content = method == "GET" and path.startswith("/v1/content/")
            answer_fault = None
            if method == "POST" and (path in ("/v1/payments", "/v1/redemptions") or path.endswith("/finish")):
                answer_fault = self._take({"drop-answer"})
            if content:
                range_start = None
                if fields.get("range", "").startswith("bytes="):
                    range_start = int(fields["range"][6:].split("-", 1)[0] or 0)
                parts = path[len("/v1/content/"):].split("/")
                kind = "manifest" if parts[1:] == ["manifest"] else ("entries" if range_start is not None and "if-range" not in fields else "archive")
                version = next((v[8:] for v in query.split("&") if v.startswith("version=")), None)
                fetch = Fetch(home, parts[0], range_start, fields.get("if-range"), kind, version)
                # The history's cuts and stalls land on downloads of whole archives, as before
                # updates existed; an update's faults are aimed at its entries (arm_entries).
                armed = self._take({"cut", "stall"}) if kind == "archive" else None
                if armed:
                    fetch.faulted = True
                    fetch.armed = armed
                if kind == "entries":
                    with self.lock:
                        aimed = next((t for t in self.targeted if (t["home"], t["product"]) == (home, fetch.product)), None)
                        if aimed and aimed["skip"] > 0:
                            aimed["skip"] -= 1
                            aimed = None
                        elif aimed:
                            self.targeted.remove(aimed)
                    if aimed:
                        fetch.faulted = True
                        if aimed["kind"] == "cut":
                            fetch.armed = ("cut", aimed["at"])
                        else:
                            fetch.hold_at, fetch.hold_limit = aimed["at"], time.time() + 20
                with self.lock:
                    self.fetches.append(fetch)
                    self.active.add(fetch)
            if self.upstream is None:
                raise ConnectionError("no upstream")
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream, limit=1 << 20)
            kept = [f"{name}:{value}" for name, value in headers if name.strip().lower() not in ("connection", "keep-alive")]
            upstream_writer.write(("\r\n".join([lines[0], *kept, "Connection: close", "", ""])).encode("latin-1") + body)
            await upstream_writer.drain()
            answer = await upstream_reader.readuntil(b"\r\n\r\n")
            answer_lines = answer.decode("latin-1").split("\r\n")
            status = int(answer_lines[0].split(" ")[1])
            answer_headers = [line.split(":", 1) for line in answer_lines[1:] if ":" in line]
            answer_fields = {name.strip().lower(): value.strip() for name, value in answer_headers}
            length = int(answer_fields["content-length"]) if "content-length" in answer_fields else None
            if status in (204, 304) or method == "HEAD":
                length = 0
            if answer_fault:
                # The server has answered (and committed); the client never hears it.
                if length:
                    await upstream_reader.readexactly(length)
                self._fired("drop-answer", f"{home} {method} {path}")
                self._reset(writer)
                return
            if fetch:
                fetch.status, fetch.etag, fetch.length = status, answer_fields.get("etag"), length
                if status == 206 and "content-range" in answer_fields:
                    fetch.start = int(answer_fields["content-range"].split(" ")[1].split("-")[0])
            kept = [f"{name}:{value}" for name, value in answer_headers if name.strip().lower() not in ("connection", "keep-alive")]
            writer.write(("\r\n".join([answer_lines[0], *kept, "Connection: close", "", ""])).encode("latin-1"))
            remaining = length
            cut_after = None
            if fetch and getattr(fetch, "armed", None):
                kind, value = fetch.armed
                if kind == "cut":
                    cut_after = value
                else:
                    stall_at, seconds = value
                    cut_after = None
                    fetch.stall_at, fetch.stall_seconds = stall_at, seconds
            while remaining is None or remaining > 0:
                # At most up to the next byte where a fault lands, so that it lands exactly there
                # (inside a range of a few hundred bytes too).
                step = 64 << 10
                if fetch:
                    for mark in (cut_after, fetch.hold_at):
                        if mark is not None and mark > fetch.bytes:
                            step = min(step, mark - fetch.bytes)
                    if fetch.hold_at is not None and fetch.bytes >= fetch.hold_at:
                        fetch.held = True
                        while fetch.held and time.time() < fetch.hold_limit:
                            await asyncio.sleep(0.02)
                        fetch.hold_at, fetch.held = None, False
                    if getattr(fetch, "stall_at", None) is not None and fetch.bytes >= fetch.stall_at:
                        fetch.stall_until = time.time() + fetch.stall_seconds
                        self._fired("stall", f"{home} {fetch.product} at {fetch.bytes}")
                        fetch.stall_at = None
                    while fetch.stall_until > time.time():
                        await asyncio.sleep(0.05)
                    if fetch.cut or (cut_after is not None and fetch.bytes >= cut_after):
                        fetch.end, fetch.faulted = "cut", True
                        if fetch.kind == "entries":
                            self._fired("update-cut", f"{home} {fetch.product} range from {fetch.range_start} cut after {fetch.bytes} bytes")
                        else:
                            self._fired("cut", f"{home} {fetch.product} at {fetch.bytes}")
                        self._reset(writer)
                        return
                chunk = await upstream_reader.read(min(step, remaining) if remaining is not None else step)
                if not chunk:
                    break
                writer.write(chunk)
                await writer.drain()
                if fetch:
                    fetch.bytes += len(chunk)
                if remaining is not None:
                    remaining -= len(chunk)
            if fetch:
                fetch.end = "complete" if remaining in (None, 0) else "upstream-gone"
            writer.close()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, ValueError, IndexError):
            if fetch and fetch.end == "open":
                fetch.end = "client-gone" if upstream_writer else "upstream-gone"
            self._reset(writer)
        finally:
            if fetch:
                fetch.closed = time.time()
                with self.lock:
                    self.active.discard(fetch)
            if upstream_writer:
                upstream_writer.close()

    def _fired(self, kind, detail):
        with self.lock:
            self.fired.append((time.time(), kind, detail))

    @staticmethod
    def _reset(writer):
        sock = writer.get_extra_info("socket")
        try:
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        writer.transport.abort()


# ---------------------------------------------------------------------------------------------
# The store's database on PostgreSQL

# The server's timestamp columns: REAL seconds since 1970 on SQLite, TIMESTAMPTZ on PostgreSQL. The
# checker compares them as numbers, so PostgreSQL's are turned into the same seconds.
TIMESTAMP_COLUMNS = {"purchaseDate", "expiresDate", "finishedAt", "createdAt", "revokedAt", "retiredAt", "appliedAt"}


def postgres_bin():
    """The newest /usr/lib/postgresql/N/bin that has initdb, as the Swift tests find it."""
    versions = sorted((int(Path(p).name) for p in glob.glob("/usr/lib/postgresql/*") if Path(p).name.isdigit()), reverse=True)
    for version in versions:
        bin = Path(f"/usr/lib/postgresql/{version}/bin")
        if all(os.access(bin / tool, os.X_OK) for tool in ("initdb", "postgres", "psql")):
            return bin
    raise SystemExit("torture: --engine postgres needs PostgreSQL (no /usr/lib/postgresql/*/bin/initdb); "
                     "install it with `make test-tools` (apt-get install postgresql)")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    """What the checker needs of a sqlite3 connection (execute, fetchall, fetchone, `with`), over
    one `psql` per query: each row comes back as one line of JSON, so numbers stay numbers and
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


class PostgresCluster:
    """A throwaway PostgreSQL cluster in the run's folder: initdb, `postgres` on a free port of
    127.0.0.1 (its socket in the folder), one database; stopped by its PID at the end. PostgreSQL
    refuses to run as root, so as root the cluster belongs to the postgres user."""

    DATABASE = "kiosk_torture"

    def __init__(self, folder, logs):
        self.bin = postgres_bin()
        self.folder, self.logs = folder, logs
        self.data = folder / "data"
        self.process = None
        self.port = None
        self.user = None
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                raise SystemExit("torture: running as root and there is no postgres user to run PostgreSQL as; "
                                 "install the postgresql package (make test-tools)")

    def _as_owner(self):
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []} if self.user else {}

    @property
    def url(self):
        return f"postgres://kiosk@127.0.0.1:{self.port}/{self.DATABASE}?tlsmode=disable"

    def start(self):
        self.folder.mkdir()
        if self.user:
            # The cluster's user must reach its folder: the run's folder is root's and private.
            os.chmod(self.folder.parent, 0o711)
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        with open(self.logs / "postgres-initdb.log", "w") as out:
            result = subprocess.run([self.bin / "initdb", "-D", self.data, "-U", "kiosk", "--auth=trust", "-E", "UTF8", "--no-sync"],
                                    stdout=out, stderr=subprocess.STDOUT, cwd=self.folder, **self._as_owner())
        if result.returncode != 0:
            raise SystemExit(f"torture: initdb failed ({result.returncode}); see {self.logs / 'postgres-initdb.log'}")
        for _ in range(5):
            self.port = free_port()
            self.process = subprocess.Popen(
                [self.bin / "postgres", "-D", self.data, "-p", str(self.port), "-k", self.folder, "-c", "listen_addresses=127.0.0.1",
                 "-c", "fsync=off", "-c", "max_connections=200"],
                stdout=open(self.logs / "postgres.log", "a"), stderr=subprocess.STDOUT, cwd=self.folder, **self._as_owner())
            deadline = time.time() + 30
            while time.time() < deadline and self.process.poll() is None:
                if subprocess.run(self._psql_argv("postgres", "SELECT 1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                    self.psql(f"CREATE DATABASE {self.DATABASE}", database="postgres")
                    self._watch()
                    return
                time.sleep(0.1)
            # Most likely the port was taken between choosing it and binding it: try another.
            self.stop()
        raise SystemExit(f"torture: PostgreSQL did not start; see {self.logs / 'postgres.log'}")

    def _watch(self):
        """A watchdog for a run that cannot clean up (SIGKILLed): once this script is gone, it stops
        PostgreSQL by its PID. It ends by itself when PostgreSQL does."""
        script = (f"while kill -0 {os.getpid()} 2>/dev/null && kill -0 {self.process.pid} 2>/dev/null; do sleep 1; done; "
                  f"if kill -0 {self.process.pid} 2>/dev/null; then kill -TERM {self.process.pid}; sleep 20; "
                  f"kill -KILL {self.process.pid} 2>/dev/null; fi")
        subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)

    def _psql_argv(self, database, sql):
        return [self.bin / "psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(self.port), "-U", "kiosk", "-d", database,
                "-v", "ON_ERROR_STOP=1", "-c", sql]

    def psql(self, sql, database=None):
        result = subprocess.run(self._psql_argv(database or self.DATABASE, sql), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"psql failed ({result.returncode}) on {sql!r}: {result.stderr.strip()}")
        return result.stdout

    def stop(self):
        """SIGTERM to PostgreSQL's own PID, then SIGKILL if it has not stopped within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------------------------------------
# The world: a store, a server, homes


class Server:
    def __init__(self, world):
        self.world = world
        self.process = None
        self.url = None
        self.port = 0

    def start(self):
        out = self.world.logs / "server.out"
        err = open(self.world.logs / "server.log", "a")
        out.write_text("")
        # Accelerated during the history (renewals); real time once it is over, so none is due
        # while the homes settle.
        scale = [] if self.world.quiet else ["--sandbox-time-scale", str(TIME_SCALE)]
        self.process = subprocess.Popen(
            [self.world.kiosk, "serve", "--catalog", str(self.world.store / "Catalog"), "--content", str(self.world.store / "Content"),
             "--data", str(self.world.server_data), "--port", str(self.port)] + self.world.database_flags() + scale,
            stdout=open(out, "w"), stderr=err, env={**os.environ, "KIOSK_LOG_LEVEL": "warning"})
        deadline = time.time() + 300
        while time.time() < deadline:
            text = out.read_text()
            if text.startswith("listening on "):
                self.url = text.split()[2]
                self.port = int(self.url.rsplit(":", 1)[1])
                self.world.proxy.upstream = ("127.0.0.1", self.port)
                return
            if self.process.poll() is not None:
                # The port of the killed server may not be free yet: take any.
                if self.port != 0:
                    self.port = 0
                    return self.start()
                raise SystemExit(f"torture: kiosk serve exited with {self.process.returncode}; see {self.world.logs / 'server.log'}")
            time.sleep(0.05)
        raise SystemExit("torture: kiosk serve did not start in 300 s")

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def admin(self, method, path, body=None):
        token = (self.world.server_data / "admin-token").read_text().strip()
        status, answer = http(self.url + path, method, token, body)
        if isinstance(status, str):
            # Callers expect a code; the history's admin calls never meet a stopped server.
            return 599, None
        return status, answer


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
        self.quiet = False       # the history is over: the sandbox clock runs at real speed
        self.agent = None        # the `kiosk agent` process of AGENT_HOME
        self.agent_starts = 0
        self.agent_settled = None  # seconds the agent took, after the history, to hold everything
        self.withdrawn = set()   # products taken out of the catalog files now
        self.tree_failures = []  # (message, home, product) of trees checked during the history
        self.trees_checked = Counter()  # "during" / "final" → trees compared with their published archive

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
                (folder / f"part-{n % 4}" / f"page-{n:03d}.bin").write_bytes(self.entry_bytes())
            books["products"].append(dict(books["products"][0], id=id, title=f"Field {name}", creditPrice=2,
                                          content={"path": f"books/{name}", "format": "zip"}))
        (self.store / "Catalog/books.json").write_text(json.dumps(books, indent=2))
        # The subscription's issue is large too, and a tar.gz: both formats cross the faults.
        with open(self.store / "Content/magazines/harbor-monthly/issue-03/plates.bin", "wb") as out:
            for _ in range(self.args.issue):
                out.write(content_rng.randbytes(MIB))
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
                "KIOSK_LOG_LEVEL": "error"}

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
        self.note_published()
        for home, ids in (("a", UPDATES), ("b", UPDATES[:1]), ("c", UPDATES[1:])):
            for id in ids:
                self.run_now(home, ["buy", id])
        self.run_now("a2", ["restore"])
        for home in self.homes:
            self.account_of(home)
        self.start_agent()

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
            pending = [r for r in self.running if wait_for == "all" or r is wait_for]
            if not pending:
                return
            if time.time() > deadline:
                for run in pending:
                    self.ops[run.index]["hung"] = True
                    run.process.kill()
                deadline = time.time() + 30
            time.sleep(0.05)

    def client_op(self):
        rng = self.rng
        home = rng.choices(["a", "a2", "b", "c"], weights=[35, 15, 30, 20])[0]
        kind = rng.choices(
            ["buy-book", "buy-large", "buy-issue", "buy-subscription", "buy-credits", "buy-defer", "buy-refused",
             "redeem", "restore", "resume", "resume-wait", "pause", "cancel", "sync", "twin"],
            weights=[10, 12, 6, 3, 10, 6, 3, 8, 6, 9, 5, 5, 3, 2, 6])[0]
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
        else:
            # Two processes on one home at once: the same purchase (one charge) or two resumes (one download).
            argv = rng.choice([["resume"], ["buy", rng.choice(LARGE)], ["buy", rng.choice(sorted(PACKS))], ["restore"]])
        background = rng.random() < 0.6
        # One more process may take a home's lock-free paths at the same time, not a crowd.
        if sum(1 for r in self.running if r.home == home) >= 2:
            self.reap(wait_for=next(r for r in self.running if r.home == home))
        if kind == "twin":
            self.launch(kind, home, argv)
            self.launch(kind, home, argv)
            return
        self.launch(kind, home, argv)
        if not background:
            self.reap(wait_for=self.running[-1])

    def admin_op(self):
        rng = self.rng
        kind = rng.choices(["approve", "decline", "refund", "revoke"], weights=[6, 3, 2, 1])[0]
        index = len(self.ops)
        op = {"index": index, "kind": kind, "home": None, "argv": [], "start": time.time(), "end": None, "exit": None}
        self.ops.append(op)
        if kind in ("approve", "decline"):
            status, pending = self.server.admin("GET", "/v1/admin/pending")
            if status != 200 or not pending:
                op["exit"], op["end"] = "nothing pending", time.time()
                return
            entries = pending if isinstance(pending, list) else pending.get("requests", [])
            if not entries:
                op["exit"], op["end"] = "nothing pending", time.time()
                return
            target = rng.choice(sorted(entries, key=lambda e: e["transactionId"]))["transactionId"]
            status, _ = self.server.admin("POST", f"/v1/admin/transactions/{target}/{kind}")
        else:
            # Refunds and revocations of books, issues and subscriptions (credit packs keep the
            # balance check exact: a refund takes back only what is left of their credits).
            with self.server_db() as db:
                rows = db.execute('''SELECT "id" FROM "storeTransaction" WHERE "status" = 'purchased' AND "kind" IN ('nonConsumable', 'subscription') ORDER BY "sequence"''').fetchall()
            if not rows:
                op["exit"], op["end"] = "nothing to refund", time.time()
                return
            target = rng.choice(rows)[0]
            status, _ = self.server.admin("POST", f"/v1/admin/transactions/{target}/{kind}", {"reason": "torture"})
        op["argv"], op["exit"], op["end"] = [target], status, time.time()

    def account_of(self, home):
        """(account id, account token) of a home, read from its own settings once: they never change
        after setup, and home b's database cannot be opened while its disk is full."""
        if home not in self.credentials:
            with self.home_db(home) as db:
                settings = {r["key"]: r["value"] for r in db.execute("SELECT key, value FROM setting WHERE key IN ('account.id', 'account.token')")}
            if not settings.get("account.id"):
                return None, None
            self.credentials[home] = settings["account.id"], settings.get("account.token")
        return self.credentials[home]

    def held(self, account):
        """The books and issues an account holds by a standing purchase, as the store says."""
        with self.server_db() as db:
            return {r["productId"] for r in db.execute(
                f"""SELECT "productId" FROM "storeTransaction" WHERE "accountId" = '{account}' AND "status" = 'purchased' AND "kind" = 'nonConsumable'""")}

    def wait_for_transaction(self, sql, seconds):
        """The first row of `sql` on the store's database, polled for up to `seconds`."""
        deadline = time.time() + seconds
        while True:
            with self.server_db() as db:
                row = db.execute(sql).fetchone()
            if row or time.time() > deadline:
                return row
            time.sleep(0.1)

    def race_op(self):
        """Two conflicting actions on one transaction at once, released together from two threads:
        a refund or revocation (operator) against the customer finishing it (POST …/finish) or
        `kiosk resume` delivering it, or an approval against a decline of one Ask to Buy (both
        operator). A 409 is the loser's legitimate answer; the outcome is the ops list's exit."""
        rng = self.rng
        variant = rng.choices(["refund-finish", "refund-resume", "revoke-finish", "approve-decline"], weights=[3, 2, 2, 3])[0]
        home = rng.choice(["a", "b", "c"])  # not the agent's home: it runs no command
        account, token = self.account_of(home)
        op = {"index": len(self.ops), "kind": "race", "home": home, "argv": [variant], "start": time.time(), "end": None, "exit": None}
        self.ops.append(op)
        if account is None:
            op["exit"], op["end"] = "no account", time.time()
            return
        # No more than two processes on one home, as for the customers' own operations.
        if sum(1 for r in self.running if r.home == home) >= 2:
            self.reap(wait_for=next(r for r in self.running if r.home == home))
        if variant == "approve-decline":
            pending = f'''SELECT "id", "productId" FROM "storeTransaction" WHERE "accountId" = '{account}' AND "status" = 'deferred' ORDER BY "sequence"'''
            with self.server_db() as db:
                row = db.execute(pending).fetchone()
            if row is None:
                # Ask first (the answer comes at once: the request is only recorded).
                # Of something the account does not hold: a request for what it owns is answered as owned.
                held = self.held(account)
                asked = self.launch("buy-defer", home, ["buy", rng.choice([id for id in BOOKS + ISSUES + LARGE if id not in held] or BOOKS),
                                                        "--payment", "defer"])
                self.reap(wait_for=self.running[-1])
                row = self.wait_for_transaction(pending, 2)
                if row is None:
                    op["exit"], op["end"] = f"nothing pending (op {asked['index']} asked)", time.time()
                    return
            actions = ["approve", "decline"]
        else:
            # Best a purchase whose delivery is under way (not finished yet); else any standing one.
            held = self.held(account)
            fresh = [id for id in LARGE + ISSUES[2:] + BOOKS if id not in held]
            standing = f"""SELECT "id", "productId" FROM "storeTransaction" WHERE "accountId" = '{account}' AND "status" = 'purchased'
                AND "kind" IN ('nonConsumable', 'subscription') AND "paymentMethod" <> 'owned'"""
            row = None
            if fresh:
                product = rng.choice(fresh)
                self.launch("buy-large" if product in LARGE else "buy-book", home, ["buy", product])
                row = self.wait_for_transaction(standing + f""" AND "productId" = '{product}' ORDER BY "sequence" DESC""", 5)
            if row is None:
                with self.server_db() as db:
                    rows = db.execute(standing + ' ORDER BY "sequence"').fetchall()
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
                outcomes[action] = self.server.admin("POST", f"/v1/admin/transactions/{target}/{action}", {"reason": "torture race"})[0]
            elif action in ("approve", "decline"):
                outcomes[action] = self.server.admin("POST", f"/v1/admin/transactions/{target}/{action}")[0]
            elif action == "finish":
                outcomes[action] = http(f"{self.server.url}/v1/transactions/{target}/finish", "POST", token)[0]
            else:
                outcomes[action] = f"op {self.launch('resume', home, ['resume'])['index']}"

        threads = [threading.Thread(target=act, args=(action,)) for action in actions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        op["race"] = dict(outcomes)
        op["exit"] = ", ".join(f"{action} {outcomes.get(action, 'no answer')}" for action in actions)
        op["end"] = time.time()

    # Updates -------------------------------------------------------------------------------

    def entry_bytes(self):
        """One small entry of an update product: random bytes (stored) or text (deflated)."""
        rng = self.update_rng
        if rng.random() < 0.5:
            return rng.randbytes(rng.randint(200, 4000))
        return "".join(f"line {n} of entry {rng.randrange(10 ** 6)}\n" for n in range(rng.randint(10, 120))).encode()

    def published_catalog(self):
        """product → the archive SHA-256 the server's catalog names now, asked past the proxy."""
        try:
            with urllib.request.urlopen(self.server.url + "/v1/catalog", timeout=30) as answer:
                catalog = json.loads(answer.read())
        except (urllib.error.URLError, OSError, ValueError):
            return {}
        return {p["id"]: p["content"]["sha256"] for p in catalog.get("products", []) if (p.get("content") or {}).get("sha256")}

    def note_published(self, catalog=None):
        """Notes every version the catalog names and keeps its archive for the checker."""
        for id, sha in (catalog or self.published_catalog()).items():
            if sha not in self.versions[id]:
                self.versions[id].append(sha)
                self.published.keep(sha, self.server_data / "content")

    def publish(self, id):
        """A new version of update product `id`: two entries changed, one removed, one added
        (each file replaced by a rename, so a reload never reads one half-written); SIGHUP, then
        waits until the catalog names it. Returns its archive's SHA-256, or None."""
        rng = self.update_rng
        folder = self.store / "Content" / self.catalog[id]["content"]["path"]
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        changed = rng.sample(files, 3)
        self.update_serial += 1
        added = folder / f"part-{rng.randrange(4)}" / f"added-{self.update_serial:03d}.bin"
        for path in changed[:2] + [added]:
            temporary = self.work / "publish.tmp"
            temporary.write_bytes(self.entry_bytes())
            os.replace(temporary, path)
        changed[2].unlink()
        old = set(self.versions[id])
        self.server.process.send_signal(signal.SIGHUP)
        deadline = time.time() + 90
        while time.time() < deadline:
            catalog = self.published_catalog()
            if catalog.get(id) and catalog[id] not in old:
                self.note_published(catalog)
                return catalog[id]
            time.sleep(0.1)
        log(f"torture: the server did not publish the new version of {id} within 90 s")
        return None

    def installed_version(self, home, id):
        """The archive SHA-256 of `id` the home's library names, or None (not installed, or the
        home's database cannot be read now)."""
        try:
            with self.home_db(home) as db:
                row = db.execute("SELECT sha256 FROM libraryItem WHERE productId = ?", (id,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def check_installed(self, home, id, when):
        """Compares home's installed tree of `id` with the published archive of the version the
        home names, when no process runs on the home. Failures are flagged by the checker."""
        if any(r.home == home for r in self.running):
            return
        version = self.installed_version(home, id)
        if version is None:
            return
        self.trees_checked[when] += 1
        problem = self.published.compare(self.homes[home] / "Library" / id, id, version, self.versions[id], self.server_data / "content")
        if problem:
            self.tree_failures.append((f"home {home}: {id} {problem} ({when} the history)", home, id))

    def update_op(self, fault=None):
        """A new version of an update product is published while a home updates to it by entries,
        and one fault is aimed at that update (UPDATE_FAULTS, in turn): the client SIGKILLed in the
        middle of a range then resumed; a range cut after a few bytes; the server SIGKILLed while a
        range is held, and restarted; the version replaced once or twice more while a range is
        held; an installed file edited by hand before the update. Installed trees of the product
        are checked before and after, byte for byte."""
        rng = self.rng
        if not self.update_faults:
            self.update_faults = rng.sample(UPDATE_FAULTS, len(UPDATE_FAULTS))
        fault = fault or self.update_faults.pop()
        id = rng.choice(UPDATES)
        # Home b's database cannot be read while its disk is full: an update begins on free disks.
        self.lift_full_disk(force=True)
        # Homes that have it installed and still own it (a refund takes it away at the next sync).
        # Not the agent's home: its agent updates by itself, whenever the catalog changes, and the
        # home runs no command (its trees are checked at the end).
        holders = [h for h in self.homes if h != AGENT_HOME and self.installed_version(h, id) and id in self.held(self.account_of(h)[0])]
        home = rng.choice(holders or sorted(h for h in self.homes if h != AGENT_HOME))
        op = {"index": len(self.ops), "kind": "update", "home": home, "argv": ["update", id, fault], "start": time.time(), "end": None, "exit": None}
        self.ops.append(op)
        # The home alone: its own processes finish first, so that the fault lands on this update.
        for run in [r for r in self.running if r.home == home]:
            self.reap(wait_for=run)
        if not holders:
            self.launch("buy-update", home, ["buy", id])
            self.reap(wait_for=self.running[-1])
        self.check_installed(home, id, "during")
        before = self.installed_version(home, id)
        version = self.publish(id)
        # Another home that has it, if one is idle, updates at the same time, in the background.
        bystanders = [h for h in holders if h != home and not any(r.home == h for r in self.running)]
        for other in [home] + bystanders[:1]:
            self.launch("update-sync", other, ["sync"])
            self.reap(wait_for=self.running[-1])
        if bystanders:
            self.launch("update-resume", bystanders[0], ["resume"])
        detail = None
        edited = None
        if fault == "hand-edit":
            # An installed file changed in place by hand (same size, other bytes): the update must
            # fetch it again rather than keep it.
            files = sorted(p for p in (self.homes[home] / "Library" / id).rglob("*") if p.is_file() and not p.is_symlink())
            if files:
                path = rng.choice(files)
                with open(path, "r+b") as out:
                    first = out.read(1)
                    out.seek(0)
                    out.write(bytes([first[0] ^ 0x5A]) if first else b"")
                edited = (path, first)
                detail = f"{path.relative_to(self.homes[home])} on {home} edited by hand before the update"
                self.faults.append({"index": len(self.ops), "kind": "update-hand-edit", "time": time.time(), "detail": detail, "home": home})
        # A byte inside one of the first ranges (an entry's local header alone is over 30 bytes;
        # a version changes at least two entries and adds one, so there are at least two ranges
        # unless entries lie side by side).
        at = rng.randint(0, 90)
        if fault != "hand-edit":
            self.proxy.arm_entries(home, id, "cut" if fault == "cut-range" else "hold", at, skip=rng.choice([0, 0, 1]))
        update = self.launch("update-resume", home, ["resume"])
        running = self.running[-1]
        if fault not in ("cut-range", "hand-edit"):
            deadline = time.time() + 10
            held = None
            while time.time() < deadline and running.process.poll() is None and not (held := self.proxy.holding(home, id)):
                time.sleep(0.02)
            if held:
                where = f"op {update['index']} on {home} held at byte {held.bytes} of the range from {held.range_start} of {id}"
                if fault == "client-kill" and rng.random() < 0.5:
                    running.process.send_signal(signal.SIGKILL)
                    self.proxy.release(home, id)
                    detail = f"{where}: client SIGKILLed"
                elif fault == "client-kill":
                    # Released first: the kill lands later in the update (another range, the tree's
                    # check, the swap) or after it.
                    self.proxy.release(home, id)
                    delay = rng.uniform(0, 0.4)
                    time.sleep(delay)
                    running.process.send_signal(signal.SIGKILL)
                    detail = f"{where}: released, client SIGKILLed {delay:.2f} s later"
                elif fault == "takeover":
                    # Stopped past its claim's lease while another `kiosk resume` on the home takes
                    # the update over; then continued, it must find its claim gone and install nothing.
                    running.process.send_signal(signal.SIGSTOP)
                    try:
                        self.proxy.freeze_home(home)
                        self.proxy.release(home, id)
                        time.sleep(CLAIM_LEASE + rng.uniform(0.5, 1.0))
                        taker = self.launch("update-takeover", home, ["resume"])
                        time.sleep(rng.uniform(0.2, 1.5))
                    finally:
                        running.process.send_signal(signal.SIGCONT)
                    detail = f"{where}: client stopped past its lease, op {taker['index']} took over, then continued"
                elif fault == "server-kill":
                    self.server.kill()
                    self.proxy.release(home, id)
                    time.sleep(rng.uniform(0.2, 1.5))
                    self.server.start()
                    detail = f"{where}: server SIGKILLed, restarted on port {self.server.port}"
                else:
                    replaced = [self.publish(id) for _ in range(rng.choice([1, 2]))]
                    self.proxy.release(home, id)
                    detail = f"{where}: {len(replaced)} newer version(s) published meanwhile"
                self.faults.append({"index": len(self.ops), "kind": f"update-{fault}", "time": time.time(), "detail": detail, "home": home})
        for run in [r for r in self.running if r.home == home]:
            self.reap(wait_for=run)
        self.proxy.release(home, id)
        left = self.proxy.disarm_entries(home, id)
        # Then resumed (after a replacement, synced first) until it is done.
        if fault == "replace":
            self.launch("update-sync", home, ["sync"])
            self.reap(wait_for=self.running[-1])
        self.launch("update-resume", home, ["resume", "--wait", "--max-wait", "20"])
        self.reap(wait_for=self.running[-1])
        if edited and self.installed_version(home, id) == before and (edited[0]).exists():
            # No update came to find the edit (it was interrupted past its retries): nothing else
            # reads installed files again, so the edit is undone rather than left for the checker.
            with open(edited[0], "r+b") as out:
                out.write(edited[1])
            detail += "; no update followed, edit undone"
        self.check_installed(home, id, "during")
        landed = detail is not None or (fault == "cut-range" and not left)
        self.update_landed[fault] += landed
        if not landed:
            # Tried again at the next scenario (an update with a single range, say, has no second).
            self.update_faults.append(fault)
            detail = f"fault not landed: the update's op {update['index']} ended {self.ops[update['index']]['exit']} before it"
        op["exit"], op["end"] = (detail or "range cut"), time.time()
        op["version"] = version

    # Faults --------------------------------------------------------------------------------

    def fault(self):
        rng = self.rng
        kinds = ["client-kill", "client-stop", "server-kill", "cut", "stall", "drop-answer", "reload", "agent-kill", "withdraw"] + (["disk-full"] if self.disk else [])
        weights = [26, 8, 8, 20, 10, 12, 8, 5, 5] + ([10] if self.disk else [])
        kind = rng.choices(kinds, weights=weights)[0]
        detail = ""
        home = "b" if kind == "disk-full" else None
        when = None
        if kind == "client-kill":
            if not self.running:
                # Start something that downloads, then kill it mid-way.
                home = rng.choice(["a", "b", "c"])
                self.launch("resume", home, ["resume"])
                time.sleep(rng.uniform(0.2, 2.0))
            victim = rng.choice(self.running) if self.running else None
            if victim is None:
                return
            victim.process.send_signal(signal.SIGKILL)
            detail = f"op {victim.index} ({' '.join(victim.argv)}) on {victim.home}"
            home = victim.home
        elif kind == "client-stop":
            suspended = self.suspend_owner()
            if suspended is None:
                return
            detail, home, when = suspended
        elif kind == "server-kill":
            self.server.kill()
            time.sleep(rng.uniform(0, 1.5))
            self.server.start()
            detail = f"restarted on port {self.server.port}"
        elif kind == "cut":
            if self.proxy.cut_active() == 0:
                self.proxy.arm("cut", rng.randint(64 << 10, 8 * MIB))
                detail = "armed for the next content response"
            else:
                detail = "open content responses reset"
        elif kind == "stall":
            seconds = rng.uniform(2.5, 4.0)
            if self.proxy.stall_active(seconds) == 0:
                self.proxy.arm("stall", (rng.randint(64 << 10, 8 * MIB), seconds))
                detail = f"armed: {seconds:.1f} s"
            else:
                detail = f"open content responses frozen {seconds:.1f} s"
        elif kind == "drop-answer":
            self.proxy.arm("drop-answer", None)
            detail = "the next payment, redemption or finish answer is lost"
        elif kind == "reload":
            id = rng.choice(LARGE + [ISSUES[2]])
            folder = self.store / "Content" / self.catalog[id]["content"]["path"]
            (folder / "edition.md").write_text(f"edition {len(self.faults)} of seed {self.args.seed}\n")
            self.server.process.send_signal(signal.SIGHUP)
            detail = f"{id} has new content"
        elif kind == "agent-kill":
            self.agent.send_signal(signal.SIGKILL)
            self.agent.wait()
            time.sleep(rng.uniform(0, 1.5))
            self.start_agent()
            detail = f"home {AGENT_HOME}'s agent killed and started again"
            home = AGENT_HOME
        elif kind == "withdraw":
            # A book taken out of the catalog files (its owners keep it), or one put back.
            books = json.loads((self.store / "Catalog/books.json").read_text())
            if self.withdrawn and (rng.random() < 0.4 or len(self.withdrawn) == len(BOOKS)):
                id = rng.choice(sorted(self.withdrawn))
                books["products"].append(self.catalog[id])
                self.withdrawn.remove(id)
                detail = f"{id} back on sale"
            else:
                id = rng.choice(sorted(set(BOOKS) - self.withdrawn))
                books["products"] = [p for p in books["products"] if p["id"] != id]
                self.withdrawn.add(id)
                detail = f"{id} taken out of the catalog files"
            (self.store / "Catalog/books.json").write_text(json.dumps(books, indent=2))
            self.server.process.send_signal(signal.SIGHUP)
        elif kind == "disk-full":
            filler = self.disk / "filler"
            with open(filler, "ab") as out:
                # Claim the free space in shrinking pieces until not even a page is left.
                piece = free_disk(self.disk)
                while piece >= 4096:
                    try:
                        os.posix_fallocate(out.fileno(), out.seek(0, os.SEEK_END), piece)
                    except OSError:
                        piece //= 2
            self.filler_until = time.time() + rng.uniform(1.0, 4.0)
            detail = f"home b's disk filled for {self.filler_until - time.time():.1f} s"
        # Faults the proxy carries out are counted when they happen (carried_out), not when armed.
        if kind not in ("cut", "stall", "drop-answer"):
            self.faults.append({"index": len(self.ops), "kind": kind, "time": when or time.time(), "detail": detail, "home": home})
        else:
            self.armed.append({"index": len(self.ops), "kind": kind, "time": time.time(), "detail": detail})

    def suspend_owner(self):
        """client-stop: SIGSTOP a client that is downloading, for longer than its claim's lease; start
        another `kiosk resume` on its home meanwhile, which takes the download over; then SIGCONT the
        first, which must find its claim gone and stop without writing. Returns (detail, home, when
        it was stopped), or None when nothing was downloading."""
        rng = self.rng

        def downloading():
            # Only a home's sole process: then the open content responses of the home are its own.
            busy = self.proxy.downloading_homes()
            return [r for r in self.running if r.home in busy and r.process.poll() is None
                    and sum(1 for other in self.running if other.home == r.home) == 1]

        found = downloading()
        if not found:
            # Start a download: buy a large item the home's account does not hold yet, else resume.
            idle = [home for home in ("a", "b", "c") if not any(r.home == home for r in self.running)]
            if not idle:
                return None
            home = rng.choice(idle)
            fresh = [id for id in LARGE + ISSUES[2:] if id not in self.held(self.account_of(home)[0])]
            if fresh:
                product = rng.choice(fresh)
                self.launch("buy-large" if product in LARGE else "buy-issue", home, ["buy", product])
            else:
                self.launch("resume", home, ["resume"])
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
            frozen = self.proxy.freeze_home(victim.home)
            time.sleep(CLAIM_LEASE + rng.uniform(0.5, 1.5))
            takeover = self.launch("takeover", victim.home, ["resume"])
            time.sleep(rng.uniform(0.5, 3.0))
        finally:
            victim.process.send_signal(signal.SIGCONT)
        detail = (f"op {victim.index} ({' '.join(victim.argv)}) on {victim.home} stopped {time.time() - stopped:.1f} s with {frozen} open "
                  f"responses; op {takeover['index']} took over")
        return detail, victim.home, stopped

    def carried_out(self):
        """Every fault that happened, in time order: the driver's own and the proxy's."""
        starts = [op["start"] for op in self.ops]
        proxy = [{"index": sum(1 for t in starts if t <= when), "kind": kind, "time": when, "detail": detail} for when, kind, detail in self.proxy.fired]
        return sorted(self.faults + proxy, key=lambda f: f["time"])

    def lift_full_disk(self, force=False):
        if self.filler_until and (force or time.time() > self.filler_until):
            (self.disk / "filler").unlink(missing_ok=True)
            self.filler_until = None

    # The history ---------------------------------------------------------------------------

    def history(self):
        rng = self.rng
        client_ops = 0
        # The update scenarios, spread evenly over the history (not counted as operations).
        updates = self.args.updates if self.args.updates is not None else max(len(UPDATE_FAULTS) + 1, self.args.ops // 12)
        done = 0
        while client_ops < self.args.ops:
            self.reap()
            self.lift_full_disk()
            if done < updates and client_ops >= self.args.ops * (done + 1) / (updates + 1):
                self.update_op()
                done += 1
                continue
            roll = rng.random()
            if roll < self.args.fault_rate:
                self.fault()
            elif roll < self.args.fault_rate + 0.08:
                self.admin_op()
                client_ops += 1
            elif roll < self.args.fault_rate + 0.12:
                self.race_op()
                client_ops += 1
            else:
                self.client_op()
                client_ops += 1
            time.sleep(rng.uniform(0, 0.4))
            if client_ops % 25 == 0 and client_ops and roll >= self.args.fault_rate:
                log(f"  {client_ops} operations, {len(self.carried_out())} faults")
        # Every kind of update fault lands at least once: one more scenario for each that never
        # did (at most two tries each).
        for fault in UPDATE_FAULTS if updates else []:
            for _ in range(2):
                if not self.update_landed[fault]:
                    self.update_op(fault)

    def quiesce(self):
        """No more faults: lets everything finish, answers every Ask to Buy, then restores and
        resumes every home until nothing is left to do."""
        self.proxy.disarm()
        self.lift_full_disk(force=True)
        self.reap(wait_for="all", timeout=300)
        # A clean restart publishes exactly what Content/ holds (a reload may still be packing),
        # with the sandbox clock at real speed: no renewal falls due while the homes settle.
        self.quiet = True
        self.server.stop()
        self.server.start()
        self.note_published()
        for _ in range(20):
            status, pending = self.server.admin("GET", "/v1/admin/pending")
            entries = (pending if isinstance(pending, list) else (pending or {}).get("requests", [])) if status == 200 else []
            if not entries:
                break
            for entry in entries:
                self.server.admin("POST", f"/v1/admin/transactions/{entry['transactionId']}/{self.rng.choice(['approve', 'decline'])}")
        self.quiescence = {}
        for home in self.homes:
            if home == AGENT_HOME:
                continue
            rounds = 0
            for rounds in range(1, 6):
                self.run_now(home, ["sync"])
                self.run_now(home, ["restore"])
                result = self.run_now(home, ["resume", "--wait", "--max-wait", "120"], timeout=900)
                if result.returncode == 0:
                    break
            self.quiescence[home] = rounds
        self.settle_agent()

    def settle_agent(self, limit=180):
        """The agent's home runs no command: its agent alone must come to hold every transaction
        of its account that it should, with the content installed. Waits until it does (or the
        limit passes: the checker then says what is missing), then stops the agent."""
        started = time.time()
        account = self.account_of(AGENT_HOME)[0]
        while time.time() - started < limit:
            if self.agent.poll() is not None:
                self.start_agent()
            with self.server_db() as db:
                transactions = [dict(r) for r in db.execute(f"""SELECT * FROM "storeTransaction" WHERE "accountId" = '{account}'""")]
            owned = Checker(self).owned(transactions).get(account, set())
            expected = {t["id"] for t in transactions if Checker.taken_in(t)}
            try:
                with self.home_db(AGENT_HOME) as db:
                    held = {r["transactionId"] for r in db.execute("SELECT transactionId FROM payment WHERE state IN ('finished', 'revoked')")}
                    unfinished = db.execute("SELECT COUNT(*) FROM payment WHERE state IN ('purchasing', 'purchased', 'delivering', 'restored')").fetchone()[0]
                    installed = {r["productId"] for r in db.execute("SELECT productId FROM libraryItem")}
                    downloads = db.execute("SELECT COUNT(*) FROM download WHERE state != 'installed'").fetchone()[0]
            except sqlite3.Error:
                held, unfinished, installed, downloads = set(), 1, set(), 1
            if expected <= held and not unfinished and owned == installed and not downloads:
                self.agent_settled = time.time() - started
                break
            time.sleep(0.5)
        self.agent.send_signal(signal.SIGTERM)
        try:
            self.agent.wait(20)
        except subprocess.TimeoutExpired:
            self.agent.kill()
        self.quiescence[AGENT_HOME] = 0

    def server_db(self):
        """The store's database, read-only. Queries quote every identifier (the schema's names are
        camelCase, which PostgreSQL folds to lower case unless quoted), so they run on both engines."""
        if self.postgres:
            return PostgresReader(self.postgres)
        connection = sqlite3.connect(f"file:{self.server_data / 'kiosk-server.sqlite'}?mode=ro", uri=True, timeout=30)
        connection.row_factory = sqlite3.Row
        return connection

    def home_db(self, home):
        connection = sqlite3.connect(f"file:{self.homes[home] / 'kiosk.sqlite'}?mode=ro", uri=True, timeout=30)
        connection.row_factory = sqlite3.Row
        return connection

    def cleanup(self, keep):
        for run in self.running:
            run.process.kill()
        if self.agent and self.agent.poll() is None:
            self.agent.kill()
        self.server.stop()
        if self.postgres:
            self.postgres.stop()
        if self.disk and keep:
            # The tmpfs goes with the unmount: keep a copy of home B for inspection.
            shutil.copytree(self.disk, self.work / "disk-copy", symlinks=True, dirs_exist_ok=True)
        if self.disk:
            subprocess.run(["umount", "-l", str(self.disk)], check=False)
        if not keep:
            shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The checker


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


class Published:
    """The archives the server published, by SHA-256, and the trees they unpack to, read with
    Python's own zipfile and tarfile: what the checker compares installed trees with."""

    def __init__(self, folder):
        self.folder = folder
        self.trees = {}

    def keep(self, sha, content):
        """Hard-links (or copies) the archive `sha` from the server's content folder, once."""
        self.folder.mkdir(exist_ok=True)
        for source in content.glob(f"{sha}.*"):
            if source.name.endswith(".manifest.json") or (self.folder / source.name).exists():
                continue
            try:
                os.link(source, self.folder / source.name)
            except OSError:
                shutil.copyfile(source, self.folder / source.name)

    def archive(self, sha, content):
        self.keep(sha, content)
        found = [p for p in self.folder.glob(f"{sha}.*")]
        return found[0] if found else None

    def tree(self, sha, content):
        """Relative path → SHA-256 / '<dir>' / '<link>' of the archive `sha` unpacked, as tree()
        gives for a folder; None when no such archive was published (or its bytes are not `sha`)."""
        if sha in self.trees:
            return self.trees[sha]
        path = self.archive(sha, content)
        result = None
        if path is not None:
            digest = hashlib.sha256()
            with open(path, "rb") as archive:
                for block in iter(lambda: archive.read(1 << 20), b""):
                    digest.update(block)
            if digest.hexdigest() == sha:
                result = {}
                if path.name.endswith(".zip") or path.name.endswith(".epub"):
                    with zipfile.ZipFile(path) as archive:
                        for info in archive.infolist():
                            name = info.filename.strip("/")
                            if info.is_dir():
                                result[name] = "<dir>"
                            elif (info.external_attr >> 16) & 0o170000 == 0o120000:
                                result[name] = "<link>"
                            else:
                                result[name] = hashlib.sha256(archive.read(info)).hexdigest()
                else:
                    with tarfile.open(path) as archive:
                        for member in archive:
                            name = member.name.removeprefix("./").strip("/")
                            if not name or name == ".":
                                continue
                            if member.isdir():
                                result[name] = "<dir>"
                            elif member.issym():
                                result[name] = "<link>"
                            elif member.isfile():
                                result[name] = hashlib.sha256(archive.extractfile(member).read()).hexdigest()
                # Folders an archive implies without an entry of their own.
                for name in list(result):
                    parts = name.split("/")
                    for depth in range(1, len(parts)):
                        result.setdefault("/".join(parts[:depth]), "<dir>")
        self.trees[sha] = result
        return result

    def compare(self, folder, product, sha, versions, content):
        """None when the tree in `folder` is, byte for byte, the published archive `sha` of
        `product` (one of `versions`, the SHA-256s the catalog named for it); otherwise what is
        wrong: a version never published, or the files that differ and the versions they are from."""
        short = {v: f"v{i + 1}" for i, v in enumerate(versions)}
        name = lambda v: f"{short.get(v, '?')} ({v[:12]})"
        if sha not in versions:
            return f"is installed as {sha[:12]}, a version the store never published for it (published: {', '.join(map(name, versions)) or 'none seen'})"
        expected = self.tree(sha, content)
        if expected is None:
            return f"is installed as {name(sha)}, whose archive is gone from the server (it cannot be checked)"
        actual = tree(folder) if folder.is_dir() else {}
        if actual == expected:
            return None
        equal = [v for v in versions if v != sha and self.tree(v, content) == actual]
        if equal:
            return f"is installed as {name(sha)} but its tree is exactly {name(equal[0])}"
        differing = sorted(p for p in set(actual) | set(expected) if actual.get(p) != expected.get(p))
        # Where each differing path's bytes come from: another published version, or none.
        origins = Counter()
        examples = []
        for path in differing:
            if path not in actual:
                origin = "missing"
            else:
                origin = "/".join(short[v] for v in versions if v != sha and (self.tree(v, content) or {}).get(path) == actual[path]) or "no version"
            origins[origin] += 1
            if len(examples) < 4:
                examples.append(f"{path} ({origin})")
        kind = "spliced" if any(o.startswith("v") for o in origins) else "differs"
        return (f"is installed as {name(sha)} but {kind}: {len(differing)} of {len(expected)} paths differ, "
                f"{', '.join(f'{n} from {o}' if o.startswith('v') or o == 'no version' else f'{n} {o}' for o, n in sorted(origins.items()))}; e.g. {', '.join(examples)}")


def parse_date(value):
    """A date from either database: the server stores seconds since 1970 (REAL), the client text."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).replace(tzinfo=None)
    return datetime.datetime.fromisoformat(value.replace(" ", "T")[:19])


class Checker:
    def __init__(self, world):
        self.world = world
        self.violations = defaultdict(list)   # invariant → [(message, home, product)]

    def flag(self, invariant, message, home=None, product=None):
        self.violations[invariant].append((message, home, product))

    def accounts(self):
        """home → account id, read from each home's own settings."""
        result = {}
        for home in self.world.homes:
            with self.world.home_db(home) as db:
                row = db.execute("SELECT value FROM setting WHERE key = 'account.id'").fetchone()
                result[home] = row[0] if row else None
        return result

    def owned(self, transactions):
        """account → products its standing purchases entitle, from the server's rows, by the store's
        rules: a book or issue bought or redeemed, and every issue a subscription covers (the
        issue current when it was bought and those published before it expires)."""
        catalog = self.world.catalog
        issue_dates = {id: catalog[id]["publicationDate"] for id in ISSUES}
        owned = defaultdict(set)
        for t in transactions:
            if t["status"] != "purchased" or t["paymentMethod"] == "owned":
                continue
            if t["kind"] == "nonConsumable":
                owned[t["accountId"]].add(t["productId"])
            elif t["kind"] == "subscription":
                bought = str(parse_date(t["purchaseDate"]).date())
                expires = str(parse_date(t["expiresDate"]).date())
                current = max([d for d in issue_dates.values() if d <= bought], default=bought)
                owned[t["accountId"]].update(id for id, d in issue_dates.items() if current <= d <= expires)
        return owned

    @staticmethod
    def taken_in(t):
        """Whether every device of the account must come to hold transaction `t` (its receipt
        saved, delivered, finished): a book, an issue or a subscription period that stands, bought
        on any device, renewed by the store or approved. Credits are spent on the store, and a free
        re-buy stands on the purchase it points at."""
        return t["status"] == "purchased" and t["kind"] != "consumable" and t["paymentMethod"] != "owned"

    def run(self):
        world = self.world
        with world.server_db() as db:
            transactions = [dict(r) for r in db.execute('SELECT * FROM "storeTransaction" ORDER BY "sequence"')]
            ledger = [dict(r) for r in db.execute('SELECT * FROM "ledgerEntry" ORDER BY "id"')]
            balances = {r["id"]: r["credits"] for r in db.execute('SELECT "id", "credits" FROM "account"')}
        accounts = self.accounts()
        payments = {}
        for home in world.homes:
            with world.home_db(home) as db:
                payments[home] = [dict(r) for r in db.execute("SELECT * FROM payment ORDER BY id")]
        self.check_payments(transactions, ledger, payments, accounts)
        self.check_taken_in(transactions, payments, accounts)
        self.check_credits(transactions, balances, payments, accounts, {e["transactionId"] for e in ledger if e["kind"] == "refund"})
        self.check_library(transactions, accounts)
        self.check_leftovers()
        self.check_outside()
        self.check_transfers()
        self.check_races()
        self.check_trees(accounts)
        self.stats = {"transactions": len(transactions), "renewals": sum(1 for t in transactions if t["paymentMethod"] == "renewal"),
                      "charges": sum(1 for e in ledger if e["kind"] == "charge"),
                      "refunds": sum(1 for e in ledger if e["kind"] == "refund")}

    def check_payments(self, transactions, ledger, payments, accounts):
        charges = Counter(e["transactionId"] for e in ledger if e["kind"] == "charge")
        refunds = Counter(e["transactionId"] for e in ledger if e["kind"] == "refund")
        by_id = {t["id"]: t for t in transactions}
        for id, count in charges.items():
            if id not in by_id:
                self.flag("duplicated", f"charge for {id}, which is no transaction")
            if count > 1:
                self.flag("duplicated", f"transaction {id} charged {count} times", product=by_id.get(id, {}).get("productId"))
        for id, count in refunds.items():
            # A book bought with credits is refunded in credits: no charge, a 0-cent refund entry.
            in_credits = by_id.get(id, {}).get("creditsSpent", 0) > 0
            if count > 1 or (id not in charges and not in_credits):
                self.flag("duplicated", f"transaction {id} refunded {count} times against {charges.get(id, 0)} charges")
        # Money is taken only for what was bought (a declined request or a failed payment is free).
        for id in charges:
            if id in by_id and by_id[id]["status"] not in ("purchased", "revoked"):
                self.flag("mismatched", f"transaction {id} ({by_id[id]['productId']}) is {by_id[id]['status']} but was charged", product=by_id[id]["productId"])
        for t in transactions:
            if t["status"] in ("purchased", "revoked") and t["amountCents"] > 0 and t["paymentMethod"] != "owned" and charges.get(t["id"], 0) == 0:
                self.flag("lost", f"transaction {t['id']} ({t['productId']}) was paid for but has no charge in the ledger", product=t["productId"])
        # A book is charged once per account, unless the earlier charge was revoked first (in the
        # order of the charges: an Ask to Buy is charged when approved, not when asked).
        charged_at = {e["transactionId"]: e["createdAt"] for e in ledger if e["kind"] == "charge"}
        paid = defaultdict(list)
        for t in transactions:
            if t["kind"] == "nonConsumable" and charges.get(t["id"]):
                paid[(t["accountId"], t["productId"])].append(t)
        for (account, product), rows in paid.items():
            rows.sort(key=lambda t: charged_at[t["id"]])
            for earlier, later in zip(rows, rows[1:]):
                if earlier["revokedAt"] is None or earlier["revokedAt"] > charged_at[later["id"]]:
                    self.flag("duplicated", f"{product} charged twice to account {account}: {earlier['id']} and {later['id']}", product=product)
        # Every charged or redeemed transaction is finished, exactly once, on the home that made it.
        keys = defaultdict(list)
        for home, rows in payments.items():
            for row in rows:
                if row["idempotencyKey"]:
                    keys[(accounts[home], row["idempotencyKey"])].append((home, row))
        for t in transactions:
            made = keys.get((t["accountId"], t["idempotencyKey"]), [])
            if t["status"] not in ("purchased", "revoked") or t["paymentMethod"] == "owned" and not made:
                continue
            if t["paymentMethod"] == "renewal":
                # Made by the store's worker, on no home: check_taken_in follows it to every device.
                continue
            if not made:
                self.flag("lost", f"transaction {t['id']} ({t['productId']}, {t['status']}) is on the server but on no home", product=t["productId"])
                continue
            if len(made) > 1:
                self.flag("duplicated", f"transaction {t['id']} is on {len(made)} payment rows", made[0][0], t["productId"])
            for home, row in made:
                expected = "revoked" if t["status"] == "revoked" else "finished"
                if row["state"] != expected:
                    self.flag("lost", f"transaction {t['id']} ({t['productId']}) is {t['status']} on the server but {row['state']} on home {home} ({row['lastError']})", home, t["productId"])
                elif row["transactionId"] != t["id"]:
                    self.flag("mismatched", f"home {home} finished {row['transactionId']} for the key of {t['id']}", home, t["productId"])
                if t["finishedAt"] is None and t["status"] == "purchased":
                    self.flag("lost", f"transaction {t['id']} ({t['productId']}) was never reported finished to the server", home, t["productId"])
        # Nothing left half-way on any home, and nothing a home believes that the server does not.
        for home, rows in payments.items():
            seen = Counter(r["transactionId"] for r in rows if r["transactionId"])
            for id, count in seen.items():
                if count > 1:
                    self.flag("duplicated", f"home {home} holds transaction {id} {count} times", home)
            for row in rows:
                if row["state"] in ("purchasing", "purchased", "delivering", "deferred", "restored"):
                    self.flag("lost", f"home {home}: {row['productId']} left {row['state']} ({row['lastError']})", home, row["productId"])
                if row["state"] == "finished" and row["kind"] != "consumable" and not row["receipt"]:
                    self.flag("lost", f"home {home}: {row['productId']} ({row['transactionId']}) is finished without its receipt", home, row["productId"])
                if row["state"] in ("finished", "revoked", "restored"):
                    server = by_id.get(row["transactionId"])
                    if server is None or server["status"] not in ("purchased", "revoked") or (row["state"] == "finished") != (server["status"] == "purchased"):
                        self.flag("mismatched", f"home {home}: {row['productId']} is {row['state']} as {row['transactionId']}, the server says {server and server['status']}", home, row["productId"])

    def check_taken_in(self, transactions, payments, accounts):
        """Every device of an account holds every transaction of it that stands (check `taken_in`),
        finished, whichever device bought it and whether or not the store made it (a renewal): the
        agent's home without running a command, the others after their restore and resume."""
        for home, rows in payments.items():
            held = {r["transactionId"]: r for r in rows if r["transactionId"]}
            for t in transactions:
                if t["accountId"] != accounts.get(home) or not self.taken_in(t):
                    continue
                row = held.get(t["id"])
                if row is None:
                    # One device's row for a book may be another purchase of it that it holds (a
                    # restore keeps the first it met); a subscription period is always its own.
                    if t["kind"] == "nonConsumable" and any(r["productId"] == t["productId"] and r["state"] == "finished" for r in rows):
                        continue
                    self.flag("lost", f"home {home} never took in {t['id']} ({t['productId']}, {t['paymentMethod']})", home, t["productId"])
                elif row["state"] != "finished":
                    self.flag("lost", f"home {home} holds {t['id']} ({t['productId']}) as {row['state']} ({row['lastError']})", home, t["productId"])

    def check_races(self):
        """Each race's two answers: a success or a 409 (the loser's answer) each, and of an approval
        and a decline of one request, exactly one success."""
        for op in self.world.ops:
            if op["kind"] != "race" or "race" not in op:
                continue
            variant, target, product = op["argv"]
            answers = op["race"]
            for action, status in answers.items():
                if isinstance(status, str) and status.startswith("op "):
                    continue
                if not (isinstance(status, int) and (200 <= status < 300 or status == 409)):
                    self.flag("errored", f"race {variant} on {target}: {action} answered {status}, neither a success nor 409", op["home"], product)
            won = [action for action, status in answers.items() if isinstance(status, int) and 200 <= status < 300]
            if variant == "approve-decline" and len(won) != 1:
                self.flag("mismatched", f"race {variant} on {target}: {' and '.join(won) or 'neither'} succeeded; exactly one may", op["home"], product)

    def check_credits(self, transactions, balances, payments, accounts, refunded):
        # A redemption of something the account already owned is answered with a free re-download.
        free = {t["id"] for t in transactions if t["paymentMethod"] == "owned"}
        for account, balance in balances.items():
            # A refund takes back what a purchase granted and gives back what it spent; a revocation
            # alone changes no balance.
            standing = [t for t in transactions if t["accountId"] == account and t["status"] in ("purchased", "revoked") and t["id"] not in refunded]
            expected = sum(t["creditsGranted"] for t in standing) - sum(t["creditsSpent"] for t in standing)
            if balance != expected:
                self.flag("mismatched", f"account {account} has {balance} credits; its transactions granted minus spent come to {expected}")
            homes = [h for h, a in accounts.items() if a == account]
            bought = spent = 0
            for home in homes:
                for row in payments[home]:
                    # Every row the server may have charged: an unfinished one is reported as lost above.
                    if row["state"] not in ("purchased", "delivering", "finished", "revoked") or not row["idempotencyKey"] or row["transactionId"] in refunded:
                        continue
                    if row["productId"] in PACKS:
                        bought += PACKS[row["productId"]] * row["quantity"]
                    elif row["paymentMethod"] == "credits" and row["transactionId"] not in free:
                        spent += self.world.catalog[row["productId"]].get("creditPrice", 0)
            if homes and bought - spent != balance:
                self.flag("mismatched", f"account {account}: its homes bought {bought} credits and spent {spent}, the server holds {balance}")

    def check_library(self, transactions, accounts):
        owned = self.owned(transactions)
        world = self.world
        for home, account in accounts.items():
            library = world.homes[home] / "Library"
            with world.home_db(home) as db:
                items = {r["productId"]: dict(r) for r in db.execute("SELECT * FROM libraryItem")}
            folders = {p.name for p in library.iterdir() if not p.name.startswith(".")} if library.exists() else set()
            should = owned.get(account, set())
            for product in sorted(should - set(items)):
                self.flag("lost", f"home {home}: {product} is owned but not installed", home, product)
            for product in sorted((set(items) | folders) - should):
                self.flag("mismatched", f"home {home}: {product} is installed but not owned (never bought, refunded or revoked)", home, product)
            for product in sorted(set(items) & should):
                source = world.store / "Content" / world.catalog[product]["content"]["path"]
                if tree(library / product) != tree(source):
                    self.flag("mismatched", f"home {home}: {product} differs from the content the server publishes", home, product)

    def check_trees(self, accounts):
        """Every installed tree in every home, byte for byte, against the published archive of the
        version the home's library names (unpacked with Python's zipfile or tarfile): a tree equal
        to no published version, or spliced from several, is `spliced`; so is every such tree the
        history's own checks (before and after each update scenario) found."""
        world = self.world
        for message, home, product in world.tree_failures:
            self.flag("spliced", message, home, product)
        for home in world.homes:
            with world.home_db(home) as db:
                items = [(r["productId"], r["sha256"]) for r in db.execute("SELECT productId, sha256 FROM libraryItem ORDER BY productId")]
            for product, sha in items:
                world.trees_checked["final"] += 1
                problem = world.published.compare(world.homes[home] / "Library" / product, product, sha, world.versions[product], world.server_data / "content")
                if problem:
                    self.flag("spliced", f"home {home}: {product} {problem} (after quiescence)", home, product)

    def update_counts(self):
        """What the updates did, from the proxy's requests and the clients' output: versions a home
        began to update by entries (fetched the manifest or a range), of those the ones that
        fetched the whole archive after all, and installs that say they were updates by entries."""
        world = self.world
        served = [f for f in world.proxy.fetches if f.status in (200, 206)]
        by_entries = {(f.home, f.product, f.version) for f in served if f.kind in ("manifest", "entries")}
        whole = {(f.home, f.product, f.version) for f in served if f.kind == "archive"}
        installed = 0
        for log_file in world.logs.glob("*.log"):
            for line in log_file.read_text(errors="replace").splitlines():
                if line.startswith("installed ") and " (update " in line:
                    installed += 1
        return {"attempted": len(by_entries), "fallbacks": len(by_entries & whole), "installed": installed,
                "ranges": sum(1 for f in served if f.kind == "entries"), "versions": sum(len(world.versions[id]) - 1 for id in UPDATES)}

    def check_leftovers(self):
        world = self.world
        for home, root in world.homes.items():
            for partial in (root / "downloads").glob("*"):
                self.flag("leftover", f"home {home}: {partial.name} left in downloads/", home)
            for staging in (root / "Library").glob(".*"):
                self.flag("leftover", f"home {home}: {staging.name} left in Library/", home)
            with world.home_db(home) as db:
                for row in db.execute("SELECT productId, state, owner, leaseUntil, lastError FROM download"):
                    if row["owner"] or row["leaseUntil"]:
                        self.flag("leftover", f"home {home}: the download of {row['productId']} still holds a lease ({row['owner']})", home, row["productId"])
                    if row["state"] != "installed":
                        self.flag("leftover", f"home {home}: the download of {row['productId']} is left {row['state']} ({row['lastError']})", home, row["productId"])

    def check_outside(self):
        """Only the expected folders in the fence, and in each home only what a home holds."""
        world = self.world
        allowed_top = {"store", "server-data", "homes", "disk"}
        for entry in world.fence.iterdir():
            if entry.name not in allowed_top:
                self.flag("outside", f"{entry} was written outside every home")
        # manifests/: each installed product's manifest (<product id>.json), the base of its next update by entries.
        home_entries = {"kiosk.sqlite", "kiosk.sqlite-wal", "kiosk.sqlite-shm", "account.lock", "agent.lock", ".kiosk-reserve", "downloads", "Library", "manifests"}
        for parent in [world.fence / "homes"] + ([world.disk] if world.disk else []):
            for entry in parent.iterdir():
                if entry.name not in world.homes or world.homes[entry.name] != entry:
                    self.flag("outside", f"{entry} was written outside every home")
        for home, root in world.homes.items():
            for entry in root.iterdir():
                if entry.name not in home_entries:
                    self.flag("outside", f"home {home}: {entry.name} is not a home's file", home)
            manifests = root / "manifests"
            for entry in manifests.iterdir() if manifests.is_dir() else []:
                if not entry.name.endswith(".json") or entry.is_symlink() or not entry.is_file():
                    self.flag("outside", f"home {home}: manifests/{entry.name} is not a product's manifest", home)
            library = root / "Library"
            for product in library.iterdir() if library.exists() else []:
                for path in product.rglob("*"):
                    if path.is_symlink():
                        target = os.path.realpath(path)
                        if not target.startswith(str(product.resolve()) + os.sep):
                            self.flag("outside", f"home {home}: {path} points outside its book ({target})", home)

    def check_transfers(self):
        """No download starts over when it need not: a request for a version goes back no further
        than where the previous request for it began (its bytes were kept), unless the reader
        cancelled in between or the download completed. Bytes are fetched twice only after a
        connection that a fault, a pause or a cancel ended: what was in flight when it ended.
        And two processes never fetch the same download at once from one home."""
        world = self.world
        fetches = sorted(world.proxy.fetches, key=lambda f: f.opened)
        self.bytes_total = sum(f.bytes for f in fetches)
        self.bytes_cut = sum(f.bytes for f in fetches if f.end != "complete")
        self.bytes_complete = sum(f.bytes for f in fetches if f.end == "complete")
        self.refetched = 0
        resets = defaultdict(list)   # (home, product) or None (any) → when bytes were legitimately dropped
        for op in world.ops:
            if op["kind"] == "cancel":
                resets[(op["home"], op["argv"][1])].append(op["start"])
            elif op["kind"] in ("refund", "revoke") or op["kind"] == "race" and op["argv"][0].split("-")[0] in ("refund", "revoke"):
                resets[None].append(op["start"])
        # What may end a transfer early: faults (a proxy fault marks its fetch itself) and the reader.
        # A suspended owner (client-stop) keeps its response open while another process takes the
        # download over from the bytes the owner had committed: what it had in flight and not yet
        # committed is fetched again.
        stoppers = [(f["time"], f.get("home"), None) for f in world.faults if f["kind"] in ("client-kill", "client-stop", "server-kill", "disk-full")]
        # A server killed in the middle of an update cuts every home's responses; a client killed, its own.
        stoppers += [(f["time"], None if f["kind"] == "update-server-kill" else f.get("home"), None) for f in world.faults
                     if f["kind"] in ("update-client-kill", "update-server-kill", "update-takeover")]
        stoppers += [(op["start"], op["home"], op["argv"][1]) for op in world.ops if op["kind"] in ("pause", "cancel")]
        stoppers += [(op["end"] or time.time(), op["home"], None) for op in world.ops if op.get("hung")]

        def explained(fetch):
            if fetch.faulted or fetch.end == "upstream-gone":
                return True
            closed = fetch.closed or time.time()
            return any(fetch.opened - 0.5 <= when <= closed + 1.0 and home in (None, fetch.home) and product in (None, fetch.product)
                       for when, home, product in stoppers)

        self.unexplained = 0
        previous = {}
        for fetch in fetches:
            # Downloads of whole archives: an update's ranges ask for any bytes of the archive, and
            # an update that does not fit (a range cut, a newer version) begins a whole download.
            if fetch.status not in (200, 206) or fetch.kind != "archive":
                continue
            key = (fetch.home, fetch.product, fetch.etag)
            earlier = previous.get(key)
            previous[key] = fetch
            if earlier is None or earlier.end == "complete":
                continue
            start = fetch.start if fetch.status == 206 else 0
            earlier_end = earlier.start + earlier.bytes
            self.refetched += max(0, earlier_end - start)
            if earlier_end > start and not explained(earlier):
                self.unexplained += earlier_end - start
                self.flag("refetched", f"home {fetch.home}: {fetch.product} fetched bytes {start}–{earlier_end} again though no fault, pause or cancel ended the fetch that had them", fetch.home, fetch.product)
            if start < earlier.start:
                window = [t for t in resets[(fetch.home, fetch.product)] + resets[None] if earlier.opened <= t <= fetch.opened]
                if not window:
                    self.flag("restarted", f"home {fetch.home}: {fetch.product} asked from byte {start} though it had fetched {earlier.start}–{earlier_end} of the same version", fetch.home, fetch.product)
        by_download = defaultdict(list)
        for fetch in fetches:
            if fetch.status in (200, 206) and fetch.kind != "manifest":
                by_download[(fetch.home, fetch.product)].append(fetch)
        for (home, product), rows in by_download.items():
            for index, earlier in enumerate(rows):
                # A fetch the proxy froze lingers after its client gave up; any other ends within
                # moments of its client stopping (killed, paused, cancelled), so a real overlap
                # means two processes downloading the same thing into one home.
                if earlier.faulted:
                    continue
                closed = earlier.closed or time.time()
                for later in rows[index + 1:]:
                    if later.opened >= closed - 1.0:
                        break
                    self.flag("duplicated", f"home {home}: {product} fetched twice at once ({earlier.bytes} and {later.bytes} bytes)", home, product)


# ---------------------------------------------------------------------------------------------


def report(world, checker, elapsed):
    ops = Counter(op["kind"] for op in world.ops)
    timeline = world.carried_out()
    faults = Counter(f["kind"] for f in timeline)
    # Kept with the run's folder (--keep, or a failure): every fault and race as it happened.
    with open(world.logs / "history.log", "w") as out:
        for fault in timeline:
            out.write(f"{fault['time']:.2f} fault after op {fault['index']}: {fault['kind']} ({fault['detail']})\n")
        for op in world.ops:
            if op["kind"] == "race":
                out.write(f"{op['start']:.2f} op {op['index']} race on {op['home']}: {' '.join(op['argv'])} → {op['exit']}\n")
            elif op["kind"] == "update":
                out.write(f"{op['start']:.2f} op {op['index']} update scenario on {op['home']}: {' '.join(op['argv'][1:])} → {op['exit']}\n")
    hung = [op for op in world.ops if op.get("hung")]
    for op in hung:
        checker.flag("hung", f"op {op['index']} (kiosk {' '.join(op['argv'])} on {op['home']}) ran over its time and was killed", op["home"])
    log("")
    log(f"kiosk torture  seed {world.args.seed}  {world.args.engine}  {sum(ops.values())} operations  {len(timeline)} faults  {elapsed:.0f} s")
    log("  operations:  " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    log("  faults:      " + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    races = [op for op in world.ops if op["kind"] == "race" and "race" in op]
    if races:
        outcomes = Counter(f"{op['argv'][0]} ({', '.join(f'{a} {v}' if isinstance(v, int) else f'{a} launched' for a, v in op['race'].items())})" for op in races)
        log("  races:       " + ", ".join(f"{k} ×{v}" for k, v in sorted(outcomes.items())))
    log(f"  server:      {checker.stats['transactions']} transactions ({checker.stats['renewals']} renewals by the store's worker), {checker.stats['charges']} charges, {checker.stats['refunds']} refunds")
    log(f"  bytes:       {checker.bytes_total / MIB:.1f} MiB fetched = {checker.bytes_complete / MIB:.1f} MiB in complete responses"
        f" + {checker.bytes_cut / MIB:.1f} MiB cut off by faults, pauses and cancels; {checker.refetched / MIB:.1f} MiB of it fetched twice")
    updates = checker.update_counts()
    log(f"  updates:     {updates['versions']} new versions of {len(UPDATES)} update products published; {updates['attempted']} updates begun by entries"
        f" ({updates['ranges']} ranges), {updates['installed']} installed by entries, {updates['fallbacks']} fell back to the whole archive")
    scenarios = [op for op in world.ops if op["kind"] == "update"]
    missed = sum(1 for op in scenarios if str(op["exit"]).startswith("fault not landed"))
    log(f"  scenarios:   {len(scenarios)} update scenarios, the fault landed in " + ", ".join(f"{k} {world.update_landed[k]}" for k in UPDATE_FAULTS)
        + (f"; {missed} missed its update (tried again)" if missed else ""))
    settled = f"held everything {world.agent_settled:.1f} s after the history" if world.agent_settled is not None else "did NOT come to hold everything"
    log(f"  agent:       home {AGENT_HOME} ran only kiosk agent ({world.agent_starts} starts); it {settled}; {len(world.withdrawn)} book(s) left withdrawn")
    log(f"  trees:       {sum(world.trees_checked.values())} installed trees compared byte for byte with their published archive"
        f" ({world.trees_checked['during']} during the history, {world.trees_checked['final']} at the end)")
    log("")
    log("  invariant    count")
    failed = False
    for invariant in ["lost", "duplicated", "mismatched", "spliced", "leftover", "outside", "restarted", "refetched", "hung", "errored"]:
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
                for fault in world.carried_out():
                    if first <= fault["time"] <= last and fault["index"] >= shown[0]["index"] - 3:
                        log(f"      fault after op {fault['index']}: {fault['kind']} ({fault['detail']})")
        if len(items) > 12:
            log(f"  … and {len(items) - 12} more {invariant}")
    log(f"  kept for inspection: {world.work} (logs/ has every operation's output)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SEED") or random.SystemRandom().randrange(1, 100000)))
    parser.add_argument("--ops", type=int, default=int(os.environ.get("OPS") or 300))
    parser.add_argument("--large", type=lambda s: [int(x) for x in s.split(",")], default=[96, 160],
                        help="MiB of each large book (comma-separated)")
    parser.add_argument("--issue", type=int, default=48, help="MiB of the subscription's large issue")
    parser.add_argument("--speed", type=int, default=48, help="each download's speed cap, MiB/s")
    parser.add_argument("--fault-rate", type=float, default=0.25)
    parser.add_argument("--updates", type=int, default=None,
                        help="update scenarios (a new version published, a fault aimed at an update by entries); default max(6, OPS/12)")
    parser.add_argument("--update-entries", type=int, default=150, help="entries of each update product")
    parser.add_argument("--kiosk", default=os.environ.get("KIOSK", str(ROOT / ".build/release/kiosk")))
    parser.add_argument("--work", default=None, help="where the run's folder is made (default: the system's temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder even when it passes")
    parser.add_argument("--engine", choices=["sqlite", "postgres"], default=os.environ.get("ENGINE") or "sqlite",
                        help="the store's database: SQLite in the server's data folder, or a throwaway PostgreSQL cluster")
    args = parser.parse_args()
    if not os.access(args.kiosk, os.X_OK):
        raise SystemExit(f"torture: no kiosk binary at {args.kiosk}; build it (swift build) or pass --kiosk")
    if args.engine == "postgres":
        postgres_bin()
    # A stopped run (make interrupted, a CI timeout) still stops its server and cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    world = World(args)
    log(f"kiosk torture: seed {args.seed}, {args.ops} operations on {args.engine}, large content {args.large} + {args.issue} MiB, in {world.work}")
    started = time.time()
    failed = True
    try:
        if world.postgres:
            world.postgres.start()
        world.build_store()
        world.make_homes()
        world.server.start()
        world.link_second_device()
        world.history()
        log(f"  history done: {len(world.ops)} operations, {len(world.carried_out())} faults; driving every home to quiescence")
        world.quiesce()
        checker = Checker(world)
        checker.run()
        failed = report(world, checker, time.time() - started)
        if failed:
            explain(world, checker)
    finally:
        world.cleanup(keep=failed or args.keep)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
