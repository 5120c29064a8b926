"""The fault suite's copy of the coverage rule (rules/coverage.py) gives, case for case, the answers
of Tests/Fixtures/coverage-cases.json, the answers the product's rule is held to by
Tests/KioskCoreTests/CoverageAgreementTests.swift: the two agree, grace windows included.

    cd scripts && python3 -m unittest torture.test_coverage        (make test runs it)
"""
import datetime, json, unittest

from .common import ROOT
from .rules import coverage

FIXTURE = ROOT / "Tests" / "Fixtures" / "coverage-cases.json"


def seconds(text):
    """An ISO 8601 instant as the server's rows give it to the checker: seconds since 1970."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class CoverageAgreement(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = json.loads(FIXTURE.read_text())["cases"]

    def test_the_fixture_covers_the_rule(self):
        """Grace windows, revocations and more than one period are all in the cases, with answers of both kinds."""
        self.assertTrue(any(case["graceWindows"] for case in self.cases))
        self.assertTrue(any(period["revoked"] for case in self.cases for period in case["periods"]))
        self.assertTrue(any(len(case["periods"]) > 1 for case in self.cases))
        answers = {issue["covered"] for case in self.cases for issue in case["issues"]}
        self.assertEqual(answers, {True, False})

    def test_covered_gives_each_answer(self):
        """The rule itself, on the fixture's instants as written (ISO 8601 with offsets)."""
        for case in self.cases:
            periods = [(p["purchased"], p["expires"], not p["revoked"]) for p in case["periods"]]
            windows = [(w["startsAt"], w["endsAt"]) for w in case["graceWindows"]]
            for issue in case["issues"]:
                with self.subTest(case=case["name"], issue=issue["published"]):
                    self.assertEqual(coverage.covered(issue["published"], case["seriesIssueDates"], periods, windows), issue["covered"])

    def test_owned_products_gives_each_answer(self):
        """The path the checker takes: server rows (seconds since 1970, a status per period) and
        grace window rows, through owned_products, give exactly the covered issues."""
        for case in self.cases:
            series = "com.example.series"
            subscription = "com.example.series.subscription"
            catalog = {subscription: {"kind": "subscription", "series": series}}
            issue_ids = {}
            for n, date in enumerate(case["seriesIssueDates"]):
                issue_ids[date] = f"com.example.series.issue-{n:02d}"
                catalog[issue_ids[date]] = {"kind": "nonConsumable", "series": series, "publicationDate": date}
            transactions = [{"id": f"txn_{n}", "accountId": "acct", "productId": subscription, "kind": "subscription",
                             "status": "revoked" if p["revoked"] else "purchased", "paymentMethod": "card",
                             "purchaseDate": seconds(p["purchased"]), "expiresDate": seconds(p["expires"])}
                            for n, p in enumerate(case["periods"])]
            grace = [{"accountId": "acct", "productId": subscription, "startsAt": seconds(w["startsAt"]), "endsAt": seconds(w["endsAt"])}
                     for w in case["graceWindows"]]
            owned = coverage.owned_products(transactions, grace, catalog).get("acct", set())
            with self.subTest(case=case["name"]):
                expected = {issue_ids[i["published"]] for i in case["issues"] if i["covered"]}
                asked = {issue_ids[i["published"]] for i in case["issues"]}
                self.assertEqual(owned & asked, expected)

    def test_another_account_or_series_is_not_covered(self):
        """Periods and windows count for their own account and their own series only."""
        catalog = {"s.sub": {"kind": "subscription", "series": "s"}, "t.sub": {"kind": "subscription", "series": "t"},
                   "s.1": {"kind": "nonConsumable", "series": "s", "publicationDate": "2026-11-01"},
                   "t.1": {"kind": "nonConsumable", "series": "t", "publicationDate": "2026-11-01"}}
        transactions = [{"id": "txn_1", "accountId": "a", "productId": "s.sub", "kind": "subscription", "status": "purchased",
                         "paymentMethod": "card", "purchaseDate": seconds("2026-10-15T12:00:00Z"), "expiresDate": seconds("2026-11-15T12:00:00Z")}]
        grace = [{"accountId": "b", "productId": "t.sub", "startsAt": seconds("2026-11-15T12:00:00Z"), "endsAt": seconds("2026-11-20T12:00:00Z")}]
        owned = coverage.owned_products(transactions, grace, catalog)
        self.assertEqual(owned["a"], {"s.1"})
        self.assertEqual(owned["b"], {"t.1"})

    def test_utc_day(self):
        self.assertEqual(coverage.utc_day("2026-11-01T00:30:00+02:00"), "2026-10-31")
        self.assertEqual(coverage.utc_day("2026-10-31T23:59:59-10:00"), "2026-11-01")
        self.assertEqual(coverage.utc_day(seconds("2026-11-01T00:30:00Z")), "2026-11-01")
        self.assertEqual(coverage.utc_day("2026-11-01 00:30:00"), "2026-11-01")


if __name__ == "__main__":
    unittest.main()
