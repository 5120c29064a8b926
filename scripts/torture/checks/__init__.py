"""The checker's rules, one module each, run in the order of CHECKS. Each module exports
`check(facts, flag)`, which judges one rule over `facts` (checker.Facts: the stores as stores.py
read them after quiescence, and the run's own record: operations, faults, the proxy's requests, the
published versions) and calls `flag(invariant, message, home=None, product=None)` for each
violation, and INVARIANTS, the rows of the table it may count in.

The invariants are the table's rows (INVARIANTS below, in the table's order): what broke, whichever
rule saw it. A rule adds a file here and a line to CHECKS; a new kind of breakage adds a row."""
from . import (approve_or_decline, book_charged_once, channel_once, codes_once, plans_once, channel_subscriptions, chunked, charged_for_purchases, charged_once, credits, fetched_at_once, finished_once,
               half_way, home_agrees, hung, installed_content, leftover, outside, owned_installed, race_answers, refetched, restarted,
               spliced, taken_in_everywhere)

INVARIANTS = {
    "lost": "something paid for or owned that a side does not hold: a transaction not finished on its home, one a device "
            "never took in, a row left half-way, a receipt missing, an owned product not installed",
    "duplicated": "something taken or held twice: a charge, a refund, a book charged twice, a transaction on two rows, "
                  "a download fetched by two processes at once",
    "mismatched": "two sides that disagree: a home and the server, a balance and its transactions, an installed tree and "
                  "the content, a charge for nothing bought, an approval and a decline that both succeeded",
    "spliced": "an installed tree that is not, byte for byte, the published archive of the version its home names",
    "leftover": "a partial file, a staging folder, a lease or an unfinished download left behind",
    "outside": "a file written outside a home's own files, or a link out of a book",
    "restarted": "a download asked again from before where its previous request began (an update by chunks: before "
                 "what its partial file held)",
    "refetched": "bytes fetched twice after a connection that no fault, pause or cancel ended; an update by chunks that "
                 "fetched a chunk its installed file holds",
    "hung": "a command that did not end in its time",
    "errored": "an action of a race answered neither a success nor 409",
}

MODULES = [charged_once, channel_once, codes_once, plans_once, channel_subscriptions, charged_for_purchases, book_charged_once, finished_once, half_way, home_agrees, taken_in_everywhere,
           credits, owned_installed, installed_content, leftover, outside, restarted, refetched, chunked, fetched_at_once, race_answers,
           approve_or_decline, spliced, hung]
CHECKS = [module.check for module in MODULES]

for module in MODULES:
    assert set(module.INVARIANTS) <= set(INVARIANTS), f"{module.__name__} flags an invariant the table has no row for"
