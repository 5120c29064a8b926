"""The fault proxy: one listening port per home between the clients and `kiosk serve`. Each client
connection carries one request (`Connection: close` both ways), so every content response is one
connection the driver can reset (RST) or freeze, and whose bytes it counts; it can also drop the
answer to a payment, redemption or finish after the server committed it. What it saw (every
content request, as a Fetch) is what the transfer checks read."""
import asyncio, socket, struct, threading, time


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



def resumed_downloads(fetches):
    """Each download of a whole archive that followed an unfinished one of the same version on the
    same home, in the order they were opened: (earlier, later, start), where `start` is the first
    byte `later` asked for. Downloads of whole archives only: an update's ranges ask for any bytes
    of an archive, and an update that does not fit (a range cut, a newer version) begins a whole
    download."""
    previous = {}
    for fetch in sorted(fetches, key=lambda f: f.opened):
        if fetch.status not in (200, 206) or fetch.kind != "archive":
            continue
        key = (fetch.home, fetch.product, fetch.etag)
        earlier = previous.get(key)
        previous[key] = fetch
        if earlier is None or earlier.end == "complete":
            continue
        yield earlier, fetch, fetch.start if fetch.status == 206 else 0
