#!/usr/bin/env python3
"""Walks the shop at the store's address in a real browser (Debian's chromium, through
playwright) the way a reader would, and judges its accessibility with axe-core
(axe-playwright-python): from the front page to a product, to buying it (which asks to sign in
first and comes back), to the library, where the book is downloaded.

    shop_check.py --store URL --email EMAIL --password PASSWORD --book PRODUCT --title TITLE
                  --issue PRODUCT --issue-title TITLE --download FILE --screenshots DIR

The reader's walk runs with JavaScript off (the pages need none) at a phone's width, 390 px; axe
runs in a second context that allows its own script. Prints one line per check and exits 1 naming
every check that failed. The downloaded file is saved to FILE, for the caller to judge
(ShopBrowserTests compares it with the publisher's and runs epubcheck on it).
"""
import argparse
import sys

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import sync_playwright

PHONE = {"width": 390, "height": 844}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--email", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--book", required=True, help="a product the account owns, delivered as a file")
    parser.add_argument("--title", required=True, help="that product's title")
    parser.add_argument("--issue", required=True, help="a product to buy in the sandbox")
    parser.add_argument("--issue-title", required=True)
    parser.add_argument("--download", required=True, help="where to save the downloaded file")
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    store = args.store.rstrip("/")
    failures = []

    def check(condition, what):
        print(("ok    " if condition else "FAIL  ") + what, flush=True)
        if not condition:
            failures.append(what)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        reader = browser.new_context(java_script_enabled=False, accept_downloads=True, viewport=PHONE)
        page = reader.new_page()
        outside = []
        page.on("request", lambda request: outside.append(request.url) if not request.url.startswith(store) else None)

        def shot(name):
            page.screenshot(path=f"{args.screenshots}/{name}.png", full_page=True)

        # The front page, then the book's own page.
        page.goto(store + "/")
        check(page.get_by_role("heading", name="New books").is_visible(), "the front page shows new books")
        check(page.get_by_role("search").is_visible(), "the front page has a search box")
        shot("front")
        page.get_by_role("link", name=args.title).first.click()
        check(page.get_by_role("heading", name=args.title, level=1).is_visible(), "a product's cover link opens its page")
        check(page.get_by_text("EPUB").first.is_visible(), "the product page names the format")
        shot("product")

        # Buying signs in first and comes back to the same purchase.
        page.get_by_role("link", name=f"Buy {args.title}").click()
        check(page.get_by_role("heading", name="Sign in").is_visible(), "buying while signed out asks to sign in")
        page.get_by_label("Email", exact=True).fill(args.email)
        page.get_by_label("Password", exact=True).fill(args.password)
        page.get_by_role("button", name="Sign in").click()
        check(page.url.endswith("/account/buy/" + args.book), "the sign-in comes back to the purchase")
        # The account owns it already: the store says so instead of taking money for nothing.
        check("already" in page.get_by_role("status").inner_text() and page.get_by_role("button", name="Pay").count() == 0,
              "a book the account owns offers no payment, and says why")
        shot("already-owned")

        # An issue bought in the sandbox's pretend payment: in the library at once.
        page.goto(store + "/products/" + args.issue)
        page.get_by_role("link", name="Buy").click()
        page.get_by_role("button", name="Pay").click()
        check(page.url.endswith("/account/library") and page.get_by_role("link", name=args.issue_title, exact=True).is_visible(),
              "an issue paid in the sandbox is in the library at once")

        # The library, and the book downloaded from it.
        page.get_by_role("link", name="Your library").click()
        check(page.get_by_role("heading", name="Your library").is_visible(), "the library opens from every page's header")
        shot("library")
        with page.expect_download() as waiting:
            page.get_by_role("link", name=f"Download {args.title}").click()
        download = waiting.value
        download.save_as(args.download)
        check(download.suggested_filename.endswith(".epub"), f"the download is saved as an EPUB ({download.suggested_filename})")

        # A search from the header.
        page.get_by_label("Search the store").fill("harbor")
        page.get_by_role("button", name="Search").click()
        check(page.get_by_role("heading", name="Search: harbor").is_visible(), "the header's search finds issues")
        shot("search")
        check(not outside, "no request left the store: " + ", ".join(outside[:3]))

        # axe-core over every kind of page, signed in where the page is the account's.
        judge = browser.new_context(bypass_csp=True, viewport=PHONE, storage_state=reader.storage_state())
        axe = Axe()
        checked = judge.new_page()
        paths = ["/", "/products/" + args.book, "/books", "/series/com.kiosk.magazines.harbor-monthly", "/search?q=harbor",
                 "/account/library", "/account", "/account/buy/com.kiosk.magazines.harbor-monthly.issue-01"]
        for path in paths:
            checked.goto(store + path)
            violations = axe.run(checked).response.get("violations", [])
            serious = [f"{v['id']} ({v['impact']}: {len(v['nodes'])})" for v in violations if v.get("impact") in ("serious", "critical")]
            check(not serious, f"axe finds no serious or critical violation on {path}" + (": " + ", ".join(serious) if serious else ""))
            # Nothing wider than a phone: the page never scrolls sideways.
            wide = checked.evaluate("document.documentElement.scrollWidth")
            check(wide <= PHONE["width"], f"{path} fits 390 px ({wide} px wide)")
        # The sign-in page, with its form to create an account, as a stranger sees it.
        stranger = browser.new_context(bypass_csp=True, viewport=PHONE).new_page()
        stranger.goto(store + "/account/buy/" + args.book)
        violations = axe.run(stranger).response.get("violations", [])
        serious = [f"{v['id']} ({v['impact']})" for v in violations if v.get("impact") in ("serious", "critical")]
        check(not serious, "axe finds no serious or critical violation on the sign-in page" + (": " + ", ".join(serious) if serious else ""))
        check(stranger.get_by_role("button", name="Create an account").is_visible(), "a stranger can create an account on the sign-in page")
        browser.close()

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
