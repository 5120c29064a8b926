"""The run, from the command line to the exit status: a world set up, the history, quiescence, the
checker, the report."""
import argparse, os, random, signal, sys, time

from . import faults, history
from .checker import Checker
from .common import ROOT, log
from .postgres import check_installed
from .report import explain, report
from .world import World


def arguments(argv=None):
    parser = argparse.ArgumentParser(prog="torture", description=sys.modules[__package__].__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SEED") or random.SystemRandom().randrange(1, 100000)))
    parser.add_argument("--ops", type=int, default=int(os.environ.get("OPS") or 300))
    parser.add_argument("--large", type=lambda s: [int(x) for x in s.split(",")], default=[96, 160],
                        help="MiB of each large book (comma-separated)")
    parser.add_argument("--issue", type=int, default=48, help="MiB of the subscription's large issue")
    parser.add_argument("--speed", type=int, default=48, help="each download's speed cap, MiB/s")
    parser.add_argument("--fault-rate", type=float, default=0.25)
    parser.add_argument("--updates", type=int, default=None,
                        help="update scenarios (a new version published, a fault aimed at an update by entries or by chunks); default max(kinds of update fault + 1, OPS/12)")
    parser.add_argument("--update-entries", type=int, default=150, help="entries of each update product")
    parser.add_argument("--kiosk", default=os.environ.get("KIOSK", str(ROOT / ".build/release/kiosk")))
    parser.add_argument("--work", default=None, help="where the run's folder is made (default: the system's temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder even when it passes")
    parser.add_argument("--engine", choices=["sqlite", "postgres"], default=os.environ.get("ENGINE") or "sqlite",
                        help="the store's database: SQLite in the server's data folder, or a throwaway PostgreSQL cluster")
    return parser.parse_args(argv)


def main(argv=None):
    args = arguments(argv)
    if not os.access(args.kiosk, os.X_OK):
        raise SystemExit(f"torture: no kiosk binary at {args.kiosk}; build it (swift build) or pass --kiosk")
    if args.engine == "postgres":
        check_installed()
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
        history.history(world)
        log(f"  history done: {len(world.ops)} operations, {len(faults.carried_out(world))} faults; driving every home to quiescence")
        history.quiesce(world)
        checker = Checker(world)
        checker.run()
        failed = report(world, checker, time.time() - started)
        if failed:
            explain(world, checker)
    finally:
        world.cleanup(keep=failed or args.keep)
    sys.exit(1 if failed else 0)
