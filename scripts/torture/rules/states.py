"""What a client's payment states mean (the client's PaymentState, Sources/KioskClient/Payments/
PaymentRecord.swift), in the groups the suite asks about."""

# The receipt entitles the content (PaymentState.owning).
OWNING = ("purchased", "restored", "delivering", "finished")
# Settled: delivered and reported (finished), or taken back by the store (revoked).
SETTLED = ("finished", "revoked")
# Not settled yet, with something left for the device to do on its own: send, deliver, finish.
UNSETTLED = ("purchasing", "purchased", "delivering", "restored")
# Left half-way when nothing runs any more: unsettled, or an Ask to Buy never answered (every
# request is answered before quiescence).
HALF_WAY = ("purchasing", "purchased", "delivering", "deferred", "restored")
# The server may have charged it (a saved purchase that reached the store, and what follows).
MAY_BE_CHARGED = ("purchased", "delivering", "finished", "revoked")
