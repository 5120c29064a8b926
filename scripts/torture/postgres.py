"""The store's PostgreSQL for --engine postgres: a throwaway cluster in the run's folder, started
and stopped by scripts/postgres-cluster (the one launcher the tests, the bench and make cluster use
too), and `psql` to read it (stores.py turns its answers into rows)."""
import os, subprocess, sys
from pathlib import Path

from .common import ROOT

LAUNCHER = ROOT / "scripts" / "postgres-cluster"


def launcher(*arguments):
    return subprocess.run([sys.executable, str(LAUNCHER), *map(str, arguments)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check_installed():
    """Stops the run before it begins when PostgreSQL is missing, saying what to install."""
    result = launcher("bin")
    if result.returncode != 0:
        raise SystemExit(f"torture: --engine postgres: {result.stderr.strip()}")


class PostgresCluster:
    """A throwaway PostgreSQL cluster in the run's folder, with one database, on a free port of
    127.0.0.1, as the postgres user when run as root; stopped by its PID at the end. A watchdog the
    launcher leaves behind stops it if this run is killed (the folder is kept with the run's)."""

    DATABASE = "kiosk_torture"

    def __init__(self, folder, logs):
        self.folder, self.logs = folder, logs
        self.port = self.pid = self.bin = None

    @property
    def url(self):
        return f"postgres://kiosk@127.0.0.1:{self.port}/{self.DATABASE}?tlsmode=disable"

    def start(self):
        if os.geteuid() == 0:
            # The cluster's user must reach its folder: the run's folder is root's and private.
            os.chmod(self.folder.parent, 0o711)
        result = launcher("start", self.folder, "--watch", os.getpid(), "--keep", "--database", self.DATABASE,
                          "--log", self.logs / "postgres.log")
        if result.returncode != 0:
            raise SystemExit(f"torture: PostgreSQL did not start: {result.stderr.strip()}")
        fields = dict(field.split("=", 1) for field in result.stdout.split())
        self.port, self.pid, self.bin = int(fields["port"]), int(fields["pid"]), Path(fields["bin"])

    def psql(self, sql, database=None):
        result = subprocess.run([self.bin / "psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(self.port), "-U", "kiosk",
                                 "-d", database or self.DATABASE, "-v", "ON_ERROR_STOP=1", "-c", sql],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"psql failed ({result.returncode}) on {sql!r}: {result.stderr.strip()}")
        return result.stdout

    def stop(self):
        """SIGINT to PostgreSQL's own PID (a fast shutdown), SIGKILL if it has not stopped in 20 s."""
        if self.pid is not None:
            launcher("stop", self.folder)
