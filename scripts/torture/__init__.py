"""make torture: a seeded random history of purchases and downloads under faults, then a checker.

One `kiosk serve` and four client homes (A, A's second device, B on a small tmpfs when this runs as
root, C) live in a fenced folder. Every client talks to the server through a fault proxy (one port
per home) that forwards one request per connection and can reset or freeze a connection mid-body, or
drop an answer after the server gave it. The driver runs OPS random operations (purchases of every
kind, redemptions, Ask to Buy answered by the admin, refunds, restores, pauses, cancels, resumes,
two processes on one home at once, and races of an operator's action against a customer's or another
operator's on one transaction) and, between them, random faults (SIGKILL of a client, SIGSTOP of a
downloading client past its claim's lease while another process takes the download over, SIGKILL and
restart of the server, cut and stalled connections, lost answers, a catalog reload that changes
content in flight, a full disk). At evenly spaced points an update scenario publishes a new version
of a zip product of many small entries while homes update to it by entries, or (half the scenarios)
a new edition of an EPUB sold as the file itself while homes update to it by content-defined chunks,
and aims a fault at that update (the client killed mid-range and resumed, the range cut, the server
restarted, the version replaced again, an installed file edited by hand, a takeover, a stall, a full
disk). Then every home is driven to quiescence and the checker compares what the server's database
and each home's database and folders believe, and every installed tree with the published archive of
the version its home names, byte for byte (a publication file: its one file, equal to the
version's). It prints one table; the run fails (exit 1) when any count in it is not 0, printing the
seed and the operations and faults that touched what broke, and keeping the folder for inspection.

The store's database is SQLite in the server's data folder, or (--engine postgres) a throwaway
PostgreSQL cluster the run starts in its own folder with scripts/postgres-cluster and stops at the
end; the checker reads the same tables from either.

    python3 scripts/torture.py --seed 7 --ops 300        (or: make torture SEED=7 OPS=300)
    python3 scripts/torture.py --engine postgres         (or: make torture ENGINE=postgres)
    cd scripts && python3 -m torture --seed 7            (the same)

Why a Python package and not a Swift target: the suite drives processes (the real `kiosk` and
`kiosk serve` binaries, SIGKILLed, SIGSTOPped, their connections cut by its own proxy) and reads
both stores' databases and a home's folders directly, with Python's sqlite3, `psql`, zipfile and
tarfile, without linking any of the product. Its checker is therefore an independent judge: it
shares no code with what it judges, so a bug in the product's decoding, schema access or rules
cannot hide itself by being on both sides. Where it needs one of the product's rules it holds a
copy (rules/), and a copy that could drift is proved to agree with the product's on shared cases
(test_coverage.py and Tests/KioskCoreTests/CoverageAgreementTests.swift over
Tests/Fixtures/coverage-cases.json).

The package:

    main.py        the command line and the run: set-up, history, quiescence, checker, report
    common.py      the products the history plays with, fault kinds, clocks, leases; log, http
    world.py       the fenced folder, the homes, launching and reaping clients, shared run state
    server.py      `kiosk serve`: start, SIGKILL, stop, the admin API
    postgres.py    the run's PostgreSQL (scripts/postgres-cluster) and psql
    proxy.py       the fault proxy and what it saw of every content request
    operations.py  the history's operations: customers' commands, the operator's, races
    faults.py      the history's faults, and every fault that happened in time order
    updates.py     new versions published, the update scenarios and their aimed faults
    history.py     the seeded history, then quiescence (and the agent's home settling)
    published.py   the archives the server published and the trees they unpack to (a
                   publication file's: the file), and a publication file's chunks
    stores.py      the ONE reader of the stores: the server's database (SQLite or PostgreSQL),
                   each home's database and folders, the publisher's content files
    rules/         the product's rules the suite judges by, one per module: coverage (which
                   issues a subscription covers, grace windows included), taken_in, states
    checker.py     reads the facts through stores.py once and runs every check
    checks/        one rule per module, each `check(facts, flag)`, registered in CHECKS; the
                   invariants (the table's rows) in checks/__init__.py
    report.py      the printed report, and the explanation of a failure
    test_coverage.py  the coverage rule's copy against Tests/Fixtures/coverage-cases.json
"""
