"""`kiosk serve` for the run: started over the run's store (its own copy of Catalog/ and Content/)
and data folder, on SQLite or on the run's PostgreSQL, with the sandbox clock sped up during the
history; SIGKILLed and restarted by faults, SIGHUPed to reload; the admin API the driver uses."""
import os, signal, subprocess, time

from . import channel_subscriptions, channels
from .common import TIME_SCALE, http


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
             "--data", str(self.world.server_data), "--port", str(self.port)] + self.world.database_flags() + scale
            + channels.server_flags(self.world) + channel_subscriptions.server_flags(self.world),
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

