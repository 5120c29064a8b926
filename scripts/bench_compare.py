#!/usr/bin/env python3
"""make bench-compare BEFORE=<git rev>: did a change make Kiosk slower? Before and after in one run.

Builds the release binaries of BEFORE (default: HEAD~1) in .bench/before (a detached git worktree),
then runs each section a change can move (BENCH_COMPARE, default "fetch serving overlap purchases
catalog"; the sections of `make bench`, see scripts/bench.py) ROUNDS times (default 2) with each
binary in turn, A B A B, so both meet the same hour of a shared machine. It prints every figure
both recorded — Kiosk's and its peers' — with the median of the rounds and after ÷ before: a peer's
ratio (nginx, curl, pgbench) is the run-to-run noise of that hour, against which Kiosk's is read.
"""
import json, os, statistics, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / ".bench"
AFTER = os.environ.get("KIOSK", str(ROOT / ".build/release/kiosk"))
BEFORE_REV = os.environ.get("BEFORE") or "HEAD~1"
SECTIONS = os.environ.get("BENCH_COMPARE", "fetch serving overlap purchases catalog").split()
ROUNDS = int(os.environ.get("ROUNDS", "2"))
# Lists of single runs, and figures that only describe the data, are not compared.
SKIPPED = {"walls", "products", "body_bytes", "bytes_transferred_over_size"}


def build_before():
    """BEFORE's release `kiosk` (BEFORE_KIOSK names one already built, with its `kiosk-server` beside it)."""
    if os.environ.get("BEFORE_KIOSK"):
        return BEFORE_REV, os.environ["BEFORE_KIOSK"]
    source = BENCH / "before"
    revision = subprocess.run(["git", "rev-parse", BEFORE_REV], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    if (source / ".git").exists():
        subprocess.run(["git", "checkout", "-q", "--detach", revision], cwd=source, check=True)
    else:
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(source), revision], cwd=ROOT, check=True)
    build = ["swift", "build", "-c", "release", "--static-swift-stdlib"]
    # The two programs alone, as the Makefile builds them (a whole release build also links the
    # dependencies' dynamic libraries, which cannot link against a static Swift runtime).
    for product in ("kiosk", "kiosk-server"):
        subprocess.run(build + ["--product", product], cwd=source, check=True)
    binary = subprocess.run(build + ["--show-bin-path"], cwd=source, check=True, capture_output=True, text=True).stdout.strip()
    return revision, str(Path(binary) / "kiosk")


def figures(tree, path=()):
    """Every number in a results.json, by its path."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key not in SKIPPED:
                yield from figures(value, path + (key,))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield path, float(tree)


def run(section, kiosk):
    environment = {**os.environ, "KIOSK": kiosk, "BENCH_ONLY": section}
    subprocess.run([sys.executable, str(ROOT / "scripts/bench.py")], check=True, env=environment, stdout=subprocess.DEVNULL)
    return dict(figures(json.loads((BENCH / "results.json").read_text())["comparisons"]))


def main():
    revision, before = build_before()
    print(f"before: {BEFORE_REV} ({revision[:12]}) {before}\nafter:  the working tree, {AFTER}")
    report = {}
    for section in SECTIONS:
        samples = {"before": {}, "after": {}}
        for round in range(ROUNDS):
            for side, kiosk in (("before", before), ("after", AFTER)):
                print(f"  {section}: round {round + 1} of {ROUNDS}, {side}", flush=True)
                for path, value in run(section, kiosk).items():
                    samples[side].setdefault(path, []).append(value)
        print(f"\n{section}")
        rows = {}
        for path in samples["before"]:
            if path not in samples["after"]:
                continue
            old, new = statistics.median(samples["before"][path]), statistics.median(samples["after"][path])
            ratio = new / old if old else float("nan")
            rows[" / ".join(path)] = {"before": old, "after": new, "after_over_before": ratio}
            print(f"  {' / '.join(path)[:96]:<96} {old:12.4f} {new:12.4f}  ×{ratio:.3f}")
        report[section] = rows
    out = BENCH / "compare.json"
    out.write_text(json.dumps({"before": revision, "rounds": ROUNDS, "sections": report}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    sys.exit(main())
