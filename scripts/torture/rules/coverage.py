"""Which issues a subscription covers, and so what an account owns: the fault suite's copy of the
product's rule.

The product's rule is `SubscriptionCoverage` (Sources/KioskCore/Catalog/SubscriptionCoverage.swift),
applied by the store's entitlement (Sources/KioskServer/Store/Store+Entitlement.swift) to the
account's standing subscription periods and to its billing grace windows, and by the client when
it queues the issues a subscription brings (Sources/KioskClient/Downloads/SubscriptionIssues.swift):

- A period covers the issue of its series current when it was bought (the latest published on or
  before the purchase day) and every issue published up to and including the day it expires; days
  are UTC days, compared as `yyyy-MM-dd` text with the catalog's publication dates.
- Only standing periods count: a refunded or revoked period covers nothing.
- A billing grace window (from the unpaid period's end to grace's end, or to the recovery, expiry
  or refund that closed it) covers by the same rule, as if it were a period bought when it opened;
  the windows are the subscription's, and stay when a period is refunded.

Tests/Fixtures/coverage-cases.json holds cases with their expected answers; the product's rule is
checked against them by Tests/KioskCoreTests/CoverageAgreementTests.swift and this copy by
test_coverage.py, so the two agree case for case.
"""
import datetime
from collections import defaultdict


def utc_day(value):
    """`yyyy-MM-dd` of an instant in UTC: seconds since 1970 (the server's REAL, or PostgreSQL's
    timestamps as stores.py gives them), an ISO 8601 text (with its offset; none is UTC) or a
    datetime (naive is UTC)."""
    if isinstance(value, (int, float)):
        instant = datetime.datetime.fromtimestamp(value, datetime.timezone.utc)
    elif isinstance(value, datetime.datetime):
        instant = value
    else:
        instant = datetime.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=datetime.timezone.utc)
    return instant.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d")


def covers(purchased, expires, publication, series_issue_dates):
    """SubscriptionCoverage(purchased:expires:).covers(publication, seriesIssueDates:): whether
    a period (or a grace window, from its start to its end) covers the issue published on
    `publication` (`yyyy-MM-dd`), given the publication dates of the series' issues."""
    bought = utc_day(purchased)
    current = max((d for d in series_issue_dates if d <= bought), default=bought)
    return current <= publication <= utc_day(expires)


def covered(publication, series_issue_dates, periods, grace_windows):
    """Whether an account's subscription to a series covers the issue published on `publication`:
    `periods` are its periods as (purchased, expires, standing), `grace_windows` its grace windows
    as (startsAt, endsAt). A period that does not stand (refunded, revoked) covers nothing."""
    return (any(standing and covers(purchased, expires, publication, series_issue_dates) for purchased, expires, standing in periods)
            or any(covers(starts, ends, publication, series_issue_dates) for starts, ends in grace_windows))


def owned_products(transactions, grace_windows, catalog):
    """account → the books and issues its standing transactions entitle, from the server's rows, as
    the store's entitlement decides: a book or an issue bought or redeemed (a free re-buy included:
    it is revoked with what it stands on), and every issue of a series its periods or grace windows
    cover. `grace_windows` are rows with accountId, productId (the subscription's), startsAt and
    endsAt; `catalog` maps product IDs to their catalog entries."""
    series_of = {id: product.get("series") for id, product in catalog.items()}
    issues = defaultdict(dict)  # series → issue ID → publication date
    for id, product in catalog.items():
        if product.get("kind") == "nonConsumable" and product.get("series") and product.get("publicationDate"):
            issues[product["series"]][id] = product["publicationDate"]
    owned = defaultdict(set)
    periods = defaultdict(list)  # (account, series) → [(purchased, expires, standing)]
    windows = defaultdict(list)  # (account, series) → [(startsAt, endsAt)]
    for t in transactions:
        if t["kind"] == "nonConsumable" and t["status"] == "purchased":
            owned[t["accountId"]].add(t["productId"])
        elif t["kind"] == "subscription" and series_of.get(t["productId"]) and t["purchaseDate"] is not None and t["expiresDate"] is not None:
            periods[(t["accountId"], series_of[t["productId"]])].append((t["purchaseDate"], t["expiresDate"], t["status"] == "purchased"))
    for window in grace_windows:
        if series_of.get(window["productId"]):
            windows[(window["accountId"], series_of[window["productId"]])].append((window["startsAt"], window["endsAt"]))
    for account, series in set(periods) | set(windows):
        dates = list(issues[series].values())
        owned[account].update(id for id, published in issues[series].items()
                              if covered(published, dates, periods[(account, series)], windows[(account, series)]))
    return owned
