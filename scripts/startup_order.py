#!/usr/bin/env python3
"""Writes Sources/kiosk/startup-order.txt: the functions a `kiosk fetch` runs, which the linker
(lld's --symbol-ordering-file) lays out together at the front of the reader's program.

Why: the kernel maps a program's code a page-cache folio (up to 2 MiB here) or a 64 KiB window
at a time around each first call, so code run at every start but spread over 24 MiB of text made
a fetch resident in 9.9 MiB of it. Laid out together, the same code is resident in 5.6–6.6 MiB
(docs/benchmarks.md, "Where the time goes", 2026-11-27 18:15).

How: valgrind's callgrind runs `kiosk fetch --sha256` of a 1 MB file from a local HTTP server
and lists every function of the program that ran. A name that the program
holds more than once (local helpers such as `objectdestroyTm`, one in each object file) is left
out: ordering by it would pull every object's copy, and with it unrelated code, to the front.

Usage: make the release build as `make` does (the Swift runtime linked in, so that its functions
are listed too), then
    swift build -c release --static-swift-stdlib --product kiosk
    python3 scripts/startup_order.py [path/to/kiosk]
and rebuild (the link does not notice the file changed: delete the kiosk binary first). A stale
list costs memory, never correctness: names that no longer exist are ignored by the linker.
"""
import collections
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "Sources/kiosk/startup-order.txt"


def main():
    kiosk = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / ".build/release/kiosk").resolve()
    if not shutil.which("valgrind"):
        sys.exit("startup_order.py: valgrind is missing; install it (apt-get install valgrind) and run again")
    if not kiosk.is_file():
        sys.exit(f"startup_order.py: no program at {kiosk}; build it first: swift build -c release --static-swift-stdlib --product kiosk")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        # valgrind 3.19 cannot read the DWARF 5 the toolchain writes; the symbol table is enough.
        program = scratch / "kiosk"
        shutil.copy(kiosk, program)
        subprocess.run(["strip", "--strip-debug", str(program)], check=True)
        # The program's own symbols, read first: a name held more than once is left out, and a
        # program without the Swift runtime linked in would give a list without its functions.
        counts = collections.Counter(line.split()[-1] for line in subprocess.run(
            ["nm", "--defined-only", str(program)], capture_output=True, text=True, check=True).stdout.splitlines() if line.strip())
        if counts["swift_release"] != 1:
            sys.exit(f"startup_order.py: {kiosk} does not hold the Swift runtime; build it with --static-swift-stdlib, as make does")
        served = scratch / "www"
        served.mkdir()
        body = os.urandom(1 << 20)
        (served / "file.bin").write_bytes(body)
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *arguments):
                pass
        handler = lambda *a, **k: Quiet(*a, directory=str(served), **k)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        profile = scratch / "callgrind.out"
        try:
            subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={profile}", str(program),
                            "fetch", f"http://127.0.0.1:{server.server_address[1]}/file.bin", "-o", str(scratch / "out.bin"),
                            "--sha256", hashlib.sha256(body).hexdigest()],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "KIOSK_HOME": str(scratch / "home")})
        finally:
            server.shutdown()
            server.server_close()
        names = functions_run(profile, program.name)
        kept = [name for name in names if counts[name] == 1]
    # An empty or short list would quietly undo the layout: a fetch runs about 3,000 functions.
    if len(kept) < 1000:
        sys.exit(f"startup_order.py: only {len(kept)} functions found in callgrind's profile; {OUTPUT.name} left as it was")
    written = OUTPUT.with_suffix(".txt.new")
    written.write_text("".join(name + "\n" for name in kept))
    written.replace(OUTPUT)
    print(f"{OUTPUT.relative_to(ROOT)}: {len(kept)} functions ({len(names) - len(kept)} left out: held more than once, or not in the symbol table)")


def functions_run(path, program_name):
    """The functions of `program_name` that callgrind's profile at `path` saw run, in the profile's order."""
    names, objects, seen = {}, {}, {}
    current_object = ""
    for line in open(path, errors="replace"):
        match = re.match(r"^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not match:
            continue
        kind, ident, name = match.groups()
        table = objects if kind.endswith("ob") else names
        if name is not None:
            table[ident] = name
        if kind == "ob":
            current_object = objects.get(ident, "")
        elif kind == "fn" and current_object.endswith("/" + program_name):
            # callgrind marks a function's recursive or repeated contexts with 'N.
            function = re.sub(r"'\d+$", "", names.get(ident, ""))
            if function and not function.startswith("0x"):
                seen[function] = None
    return list(seen)


if __name__ == "__main__":
    main()
