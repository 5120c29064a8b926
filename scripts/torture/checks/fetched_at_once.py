"""Two processes never fetch the same download into one home at once. A fetch the proxy froze
lingers after its client gave up; any other ends within moments of its client stopping (killed,
paused, cancelled), so a real overlap means two processes downloading the same thing."""
import time
from collections import defaultdict

INVARIANTS = ("duplicated",)


def check(facts, flag):
    by_download = defaultdict(list)
    for fetch in sorted(facts.world.proxy.fetches, key=lambda f: f.opened):
        if fetch.status in (200, 206) and fetch.kind != "manifest":
            by_download[(fetch.home, fetch.product)].append(fetch)
    for (home, product), rows in by_download.items():
        for index, earlier in enumerate(rows):
            if earlier.faulted:
                continue
            closed = earlier.closed or time.time()
            for later in rows[index + 1:]:
                if later.opened >= closed - 1.0:
                    break
                flag("duplicated", f"home {home}: {product} fetched twice at once ({earlier.bytes} and {later.bytes} bytes)", home, product)
