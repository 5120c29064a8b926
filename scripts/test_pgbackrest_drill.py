"""scripts/pgbackrest-drill's round trip on throwaway clusters of scripts/postgres-cluster: rows, a
full backup, more rows, a point in time, more rows, a restore to that time into a new cluster (exactly
the rows before it, and it takes writes) and one to the latest (every row), then the set-up's two
ways (a reload with `postgres-cluster start --archive`, else a restart, refused for a watched cluster).

    cd scripts && python3 -m unittest -q test_pgbackrest_drill

Needs PostgreSQL and pgBackRest (apt-get install postgresql pgbackrest): without either it fails,
saying which; it never skips. Every cluster it starts is stopped and removed, also when it fails.
"""
import os, shutil, subprocess, sys, tempfile, unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "postgres-cluster"
DRILL = HERE / "pgbackrest-drill"
TIMEOUT = 180


def run(script, *arguments):
    return subprocess.run([sys.executable, str(script), *map(str, arguments)], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)


def fields(line):
    return dict(field.split("=", 1) for field in line.split() if "=" in field)


class PgBackRestDrillTests(unittest.TestCase):
    def setUp(self):
        if not shutil.which("pgbackrest"):
            self.fail("pgBackRest is not installed (no pgbackrest on PATH): apt-get install pgbackrest")
        found = run(LAUNCHER, "bin")
        if found.returncode != 0:
            self.fail(f"PostgreSQL is not installed: {found.stderr.strip()}")
        self.bin = Path(found.stdout.strip())
        self.root = Path(tempfile.mkdtemp(prefix="pgbackrest-drill-test-"))
        # The postgres user (the clusters' when this runs as root) must reach the clusters' folders.
        os.chmod(self.root, 0o755)
        self.addCleanup(shutil.rmtree, self.root, True)

    def ok(self, script, *arguments):
        """Runs a script that must succeed; its standard output's one line."""
        result = run(script, *arguments)
        self.assertEqual(result.returncode, 0, f"{script.name} {' '.join(map(str, arguments))} failed "
                                               f"({result.returncode}): {result.stderr.strip()}")
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 1, f"{script.name} {arguments[0]} printed {result.stdout!r}, not one line")
        return lines[0]

    def started(self, line, folder):
        """The port=… pid=… bin=… line's fields, the cluster it names stopped and removed at the end."""
        self.addCleanup(run, LAUNCHER, "stop", folder, "--remove")
        values = fields(line)
        self.assertEqual(set(values), {"port", "pid", "bin"}, f"not a port=… pid=… bin=… line: {line!r}")
        self.assertEqual(values["bin"], str(self.bin))
        return values

    def start(self, name, *options):
        folder = self.root / name
        return folder, self.started(self.ok(LAUNCHER, "start", folder, *options), folder)

    def sql(self, cluster, statement):
        result = subprocess.run([self.bin / "psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", cluster["port"], "-U", "kiosk",
                                 "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", statement],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, f"psql -c {statement!r} on port {cluster['port']}: {result.stderr.strip()}")
        return result.stdout.strip()

    def test_restores_to_a_point_in_time_and_to_the_latest(self):
        source, cluster = self.start("source", "--archive", "--watch", os.getpid())
        self.sql(cluster, "CREATE TABLE sale (id int PRIMARY KEY)")
        self.sql(cluster, "INSERT INTO sale SELECT generate_series(1, 100)")
        set_up = fields(self.ok(DRILL, "setup", source))
        self.assertEqual(set_up, cluster, "a cluster started with --archive is set up without a restart")
        self.assertEqual(self.sql(cluster, "SHOW archive_mode"), "on")

        label = fields(self.ok(DRILL, "backup", source))["label"]
        self.assertRegex(label, r"^\d{8}-\d{6}F$")
        self.sql(cluster, "INSERT INTO sale SELECT generate_series(101, 200)")
        moment = self.ok(DRILL, "time", source)
        self.assertRegex(moment, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\+00$")
        self.sql(cluster, "INSERT INTO sale SELECT generate_series(201, 300)")

        # While the source runs, restore flushes it first: the archive holds a commit after the target.
        at_moment = self.root / "at-moment"
        restored = self.started(self.ok(DRILL, "restore", source, "--into", at_moment, "--target", moment, "--watch", os.getpid()),
                                at_moment)
        self.assertEqual(self.sql(restored, "SELECT count(*), min(id), max(id) FROM sale"), "200|1|200")
        self.assertEqual(self.sql(restored, "SELECT pg_is_in_recovery()"), "f")
        self.sql(restored, "INSERT INTO sale VALUES (1000)")
        self.assertEqual(self.sql(restored, "SHOW archive_mode"), "off", "a restored cluster must not push into the source's repository")
        self.assertTrue((at_moment / "data/postmaster.pid").is_file(), "postgres-cluster stop reads NEWFOLDER/data/postmaster.pid")

        self.sql(cluster, "INSERT INTO sale SELECT generate_series(301, 400)")
        flushed = fields(self.ok(DRILL, "flush", source))
        self.assertRegex(flushed["wal"], r"^[0-9A-F]{24}$")
        latest = self.root / "latest"
        restored = self.started(self.ok(DRILL, "restore", source, "--into", latest, "--latest"), latest)
        self.assertEqual(self.sql(restored, "SELECT count(*), max(id) FROM sale"), "400|400",
                         "the latest restore follows the source's timeline, not the first restore's")

        before = run(DRILL, "restore", source, "--into", self.root / "before", "--target", "2000-01-01 00:00:00+00")
        self.assertEqual(before.returncode, 1, before.stderr)
        self.assertIn("no backup ended at or before 2000-01-01 00:00:00+00", before.stderr)
        self.assertFalse((self.root / "before").exists(), "a refused restore makes no folder")
        taken = run(DRILL, "restore", source, "--into", latest)
        self.assertEqual(taken.returncode, 2, taken.stderr)
        self.assertIn("is not empty", taken.stderr)

        stopped = run(LAUNCHER, "stop", at_moment, "--remove")
        self.assertEqual(stopped.returncode, 0, stopped.stderr)
        self.assertFalse(at_moment.exists())

    def test_setup_restarts_a_cluster_started_without_archive(self):
        source, cluster = self.start("plain")
        self.assertEqual(self.sql(cluster, "SHOW archive_mode"), "off")
        set_up = fields(self.ok(DRILL, "setup", source))
        self.assertEqual(set_up["port"], cluster["port"])
        self.assertNotEqual(set_up["pid"], cluster["pid"], "archive_mode=on needs a restart: a new postmaster")
        self.assertEqual(self.sql(cluster, "SHOW archive_mode"), "on")
        self.assertEqual((source / "data/postmaster.pid").read_text().split("\n", 1)[0], set_up["pid"])
        self.assertRegex(fields(self.ok(DRILL, "flush", source))["wal"], r"^[0-9A-F]{24}$")

    def test_setup_refuses_to_restart_a_watched_cluster(self):
        source, cluster = self.start("watched", "--watch", os.getpid())
        refused = run(DRILL, "setup", source)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertEqual(len(refused.stderr.strip().splitlines()), 1, refused.stderr)
        self.assertIn("postgres-cluster start --archive", refused.stderr)
        self.assertEqual(self.sql(cluster, "SELECT 1"), "1", "the cluster still runs, on its PID")
        self.assertEqual(self.sql(cluster, "SHOW archive_mode"), "off")

    def test_a_folder_without_a_cluster_is_refused(self):
        refused = run(DRILL, "backup", self.root / "nothing")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("holds no cluster", refused.stderr)


if __name__ == "__main__":
    unittest.main()
