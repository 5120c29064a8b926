"""The checker: reads the stores once after quiescence (stores.py, the only reader), works out what
each account owns by the product's rules (rules/coverage.py), and runs every rule in checks/ over
those facts, collecting the violations by invariant."""
from collections import defaultdict

from . import stores
from .checks import CHECKS
from .rules import coverage


class Facts:
    """What the rules judge: the server's rows and grace windows, each home's rows and folders, the
    fence's folders, what each account owns, and the world (the run's own record: operations,
    faults, the proxy's requests, the published versions)."""

    def __init__(self, world):
        self.world = world
        self.server = stores.read_server(world)
        self.homes = stores.read_homes(world)
        self.accounts = {name: home.account for name, home in self.homes.items()}
        self.owned = coverage.owned_products(self.server.transactions, self.server.grace, world.catalog)
        self.fence_entries = stores.fence_entries(world)
        self.home_parents_entries = stores.home_parents_entries(world)
        self._content = {}

    def content_tree(self, product):
        """The tree of the content the publisher's files hold for `product` (read once)."""
        if product not in self._content:
            self._content[product] = stores.content_tree(self.world, product)
        return self._content[product]


class Checker:
    def __init__(self, world):
        self.world = world
        self.violations = defaultdict(list)   # invariant → [(message, home, product)]

    def flag(self, invariant, message, home=None, product=None):
        self.violations[invariant].append((message, home, product))

    def run(self):
        facts = Facts(self.world)
        self.facts = facts
        for check in CHECKS:
            check(facts, self.flag)
        server = facts.server
        self.stats = {"transactions": len(server.transactions), "renewals": sum(1 for t in server.transactions if t["paymentMethod"] == "renewal"),
                      "charges": sum(1 for e in server.ledger if e["kind"] == "charge"),
                      "refunds": sum(1 for e in server.ledger if e["kind"] == "refund"),
                      "grace windows": len(server.grace)}
