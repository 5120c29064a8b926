#!/usr/bin/env python3
"""Drives the publisher's console in a real browser (Debian's chromium, through playwright) the way
an operator would, and checks what it shows against `kiosk admin … --json`.

    console_check.py --console URL --token TOKEN --sales SALES.json --approve TXN --refund TXN
                     --screenshots DIR

Takes a screenshot of every page it visits into DIR (the overview also at 360 px wide), judges each
with axe-core (axe-playwright-python: no serious or critical violation), prints one line per check,
and exits 1 naming every check that failed. ConsoleBrowserTests runs it.
"""
import argparse
import json
import re
import sys

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import sync_playwright


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--console", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--sales", required=True, help="kiosk admin sales --since FIRST-DAY --json, saved")
    parser.add_argument("--approve", required=True, help="a pending Ask to Buy to approve")
    parser.add_argument("--refund", required=True, help="a purchased transaction to refund")
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--email", help="a reader's sign-in email, to find, disable, enable and give a reset code")
    parser.add_argument("--unmatched-event", help="the id of a Stripe event the store could not match, which the Payments page lists to act on")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    console = args.console.rstrip("/")
    failures = []

    def check(condition, what):
        print(("ok    " if condition else "FAIL  ") + what, flush=True)
        if not condition:
            failures.append(what)

    sales = json.load(open(args.sales))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        outside = []
        page.on("request", lambda request: outside.append(request.url) if not request.url.startswith(console) else None)

        def shot(name):
            page.screenshot(path=f"{args.screenshots}/{name}.png", full_page=True)

        # Logging in: a wrong token is refused, the right one opens the overview.
        page.goto(console + "/")
        check(page.url == console + "/login", f"without a session the console sends to /login (at {page.url})")
        page.get_by_label("Admin token").fill("not-the-token")
        response = None
        with page.expect_navigation() as navigation:
            page.get_by_role("button", name="Log in").click()
        response = navigation.value
        check(response.status == 401 and page.get_by_role("alert").is_visible(), "a wrong token is refused with 401 and says so")
        page.get_by_label("Admin token").fill(args.token)
        page.get_by_role("button", name="Log in").click()
        check(page.url.rstrip("/") == console and page.get_by_role("heading", name="Overview").is_visible(), "the right token opens the overview")
        cookies = context.cookies()
        session = [cookie for cookie in cookies if cookie["name"] == "kiosk_console"]
        check(len(session) == 1 and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict",
              f"the session cookie is HttpOnly and SameSite=Strict ({session})")
        shot("overview")

        # The overview's figures are the rows of kiosk admin sales --json.
        units = sum(row["sales"] for row in sales)
        refunds = sum(row["refunds"] for row in sales)
        figures = {item.inner_text().split("\n")[0]: item.locator("b").inner_text() for item in page.locator(".figures li").all()}
        check(figures.get("Units sold") == str(units), f"units sold {figures.get('Units sold')} = {units} from kiosk admin sales --json")
        check(figures.get("Refunds") == str(refunds), f"refunds {figures.get('Refunds')} = {refunds}")
        by_currency = {}
        for row in sales:
            by_currency[row["currency"]] = by_currency.get(row["currency"], 0) + row["netCents"]
        expected = ", ".join(sorted(f"{'-' if cents < 0 else ''}{abs(cents) // 100}.{abs(cents) % 100:02d} {currency}" for currency, cents in by_currency.items()))
        revenue = next((value for name, value in figures.items() if name.startswith("Revenue")), None)
        check(revenue == expected, f"revenue {revenue} = {expected}")
        days = {}
        for row in sales:
            days[row["day"]] = days.get(row["day"], 0) + row["sales"]
        table = page.get_by_role("table", name="By day")
        shown = {cells[0]: int(cells[1]) for cells in (row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all())}
        check(all(shown.get(day) == count for day, count in days.items()), f"every day's units match ({days})")
        charts = page.locator("svg[role=img]")
        check(charts.count() == 2 and all(chart.get_attribute("aria-label") for chart in charts.all()), "two charts, each with a text alternative")
        bars = [title.text_content() or "" for title in page.locator("svg rect title").all()]
        check(any(text.endswith(f"{count} sold") for text in bars for count in days.values() if count), "the units chart draws the days sold")

        # Usable at 360 px wide: nothing wider than the screen.
        page.set_viewport_size({"width": 360, "height": 740})
        width = page.evaluate("document.documentElement.scrollWidth")
        check(width <= 360, f"the overview fits 360 px (scroll width {width})")
        shot("overview-360")
        page.set_viewport_size({"width": 1280, "height": 800})

        # Ask to Buy: approve through the form.
        page.goto(console + "/ask-to-buy")
        shot("ask-to-buy")
        page.get_by_role("button", name=f"Approve {args.approve}").click()
        check(page.get_by_role("status").inner_text() == f"{args.approve} approved", "an Ask to Buy is approved through its form")
        check(page.get_by_role("button", name=f"Approve {args.approve}").count() == 0, "the approved request leaves the list")
        page.reload()
        check(page.get_by_role("status").count() == 0, "what a form did is said once: the page reloaded says it no more")
        page.goto(console + "/ask-to-buy?done=Every+request+approved")
        check(page.get_by_role("status").count() == 0, "a link cannot make the console say something was done")

        # Customers: find the purchase, refund it with a reason and the confirmation.
        page.goto(console + "/customers")
        page.get_by_label("Account or transaction ID").fill(args.refund)
        page.get_by_role("button", name="Find").click()
        shot("customer")
        row = page.get_by_role("row").filter(has_text=args.refund)
        row.get_by_label("Reason").fill("asked for by the reader")
        row.get_by_role("button", name="Refund").click()
        check(page.url.startswith(console + "/customers"), "a refund without the confirmation stays on the page (the box is required)")
        row = page.get_by_role("row").filter(has_text=args.refund)
        row.get_by_label("Reason").fill("asked for by the reader")
        row.get_by_label("I mean it").check()
        row.get_by_role("button", name="Refund").click()
        check(page.get_by_role("status").inner_text() == f"{args.refund} refunded", "a purchase is refunded through its form")
        shown = page.get_by_role("row").filter(has_text=args.refund).inner_text()
        check("refunded" in shown and "asked for by the reader" in shown, f"the customer's page shows the refund and its reason ({shown})")
        token = page.locator("input[name=csrf]").first.get_attribute("value")
        bogus = context.request.post(console + "/transactions/withdraw",
                                     form={"csrf": token, "transaction": args.refund, "confirm": "yes", "action": "bogus"})
        check(bogus.status == 400, f"a withdraw form that says neither refund nor revoke does nothing ({bogus.status})")

        for name in ["products", "notifications", "health"]:
            page.goto(f"{console}/{name}")
            check(page.get_by_role("heading", name=name.capitalize()).is_visible(), f"the {name} page shows")
            if name == "products":
                page.wait_for_load_state("networkidle")
                covers = page.get_by_role("img", name=re.compile("^cover of "))
                drawn = covers.evaluate_all("images => images.filter(i => i.complete && i.naturalWidth > 0).length")
                check(covers.count() > 0 and drawn == covers.count(), f"the products page shows every product's cover ({drawn} of {covers.count()} drawn)")
                epub = page.get_by_role("row").filter(has_text="com.kiosk.books.salt-and-stars")
                check("Wren Calloway" in epub.inner_text() and "image/png" in epub.inner_text(),
                      "the products page shows the EPUB's author and its own cover's type")
            shot(name)

        # Forms need this session's CSRF token; requests without the session are refused.
        forged = context.request.post(console + "/ask-to-buy/answer", form={"transaction": args.approve, "answer": "decline"})
        check(forged.status == 403, f"a form without its CSRF token is refused ({forged.status})")
        stranger = browser.new_context()
        anonymous = stranger.request.post(console + "/transactions/withdraw",
                                          form={"transaction": args.refund, "action": "revoke", "confirm": "yes"})
        check(anonymous.status == 403, f"a form without the session cookie is refused ({anonymous.status})")
        looked = stranger.request.get(console + "/customers?q=" + args.refund, max_redirects=0)
        check(looked.status == 303 and looked.headers.get("location") == "/login", "a page without the session cookie sends to /login")
        stranger.close()

        if args.email:
            # A reader found by email; disabled, enabled and given a reset code, each in the audit list.
            page.goto(console + "/customers")
            page.get_by_label("Email, account or transaction ID").fill(args.email.upper())
            page.get_by_role("button", name="Find").click()
            check(page.get_by_text(f"signs in with {args.email}").is_visible(), "the console finds a reader by email, whatever its case")
            page.get_by_label("Reason, for the audit list").fill("chargeback under review")
            page.get_by_role("button", name="Disable (sign out every device)").click()
            check("disabled" in page.get_by_role("status").inner_text(), "disabling says every device is signed out")
            check(page.get_by_role("cell", name="chargeback under review").is_visible(), "the audit list shows the disabling and its reason")
            page.get_by_role("button", name="Enable").click()
            page.get_by_role("button", name="Give a reset code").click()
            code = page.locator("code.code").inner_text()
            check(len(code) == 19 and code.count("-") == 3, f"a reset code is shown once ({code})")
            shot("customer-care")

        if args.unmatched_event:
            page.goto(console + "/payments")
            to_act = page.get_by_role("table", name="To act on")
            check(to_act.is_visible() and args.unmatched_event in to_act.inner_text(), "the Payments page lists the unmatched Stripe event to act on")
            by_channel = page.get_by_role("table", name="Sales by channel, the last 30 days")
            check(by_channel.is_visible() and "sandbox" in by_channel.inner_text(), "the Payments page shows the sales by channel (the sandbox's here)")
            shot("payments")

        # axe-core over every page the operator sees, as the shop's are judged: in a context of its
        # own with the session's cookie, since axe runs as a script and the console's pages allow none.
        judge = browser.new_context(bypass_csp=True, storage_state=context.storage_state())
        axe = Axe()
        checked = judge.new_page()
        for path in ["/", "/?days=90", "/products", "/customers?q=" + args.refund, "/ask-to-buy", "/codes", "/notifications", "/payments", "/health", "/no-such-page"]:
            checked.goto(console + path)
            violations = axe.run(checked).response.get("violations", [])
            serious = [f"{v['id']} ({v['impact']}: {len(v['nodes'])})" for v in violations if v.get("impact") in ("serious", "critical")]
            check(not serious, f"axe finds no serious or critical violation on {path}" + (": " + ", ".join(serious) if serious else ""))
        judge.close()
        login = browser.new_context(bypass_csp=True).new_page()
        login.goto(console + "/login")
        violations = axe.run(login).response.get("violations", [])
        serious = [f"{v['id']} ({v['impact']})" for v in violations if v.get("impact") in ("serious", "critical")]
        check(not serious, "axe finds no serious or critical violation on /login" + (": " + ", ".join(serious) if serious else ""))

        page.goto(console + "/")
        page.get_by_role("button", name="Log out").click()
        page.goto(console + "/health")
        check(page.url == console + "/login", "after logging out the session is gone")
        check(not outside, f"the browser fetched nothing from elsewhere ({outside[:3]})")
        browser.close()

    if failures:
        print(f"{len(failures)} console check(s) failed; screenshots in {args.screenshots}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
