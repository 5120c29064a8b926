#!/usr/bin/env python3
"""Walks a subscriber through the shop in a real browser (Debian's chromium, through playwright),
paying on the web with Stripe: from the plan's page to Stripe's checkout, back to the library
while the payment is on its way, then to an issue of the plan's first period and, once Stripe
renews it, to an issue of the second period, downloaded.

    shop_subscribe_check.py --store URL --email EMAIL --password PASSWORD --plan PRODUCT
        --first-issue-title TITLE --second-issue-title TITLE --periods S1,E1,E2
        --webhook-secret whsec_… --stripe-record FILE --download FILE --screenshots DIR

Stripe's part is played here: the browser is sent to Stripe's checkout (which this machine cannot
reach: the check is the store's redirect to it), and the events Stripe would send (the first invoice
paid, the session completed, the next invoice paid) are signed with Stripe's own library (the
`stripe` package) and posted to the store's webhook, with the intent Kiosk sent Stripe read from
the API stand-in's record (scripts/stripe_standin.py). Periods are Unix seconds. Prints one line
per check and exits 1 naming every check that failed; axe-core judges the library.
"""
import argparse
import json
import sys
import time
import urllib.request

import stripe
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import sync_playwright

PHONE = {"width": 390, "height": 844}


def post_event(store, secret, event):
    body = json.dumps(event)
    header = stripe.WebhookSignature.generate_signature_header(body, secret)
    request = urllib.request.Request(store + "/v1/stripe/webhook", data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Stripe-Signature": header})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def invoice(number, subscription, account, plan, start, end, reason):
    return {"id": f"evt_walk_invoice_{number}", "object": "event", "type": "invoice.paid", "created": int(time.time()),
            "data": {"object": {"id": f"in_walk_{number}", "object": "invoice", "billing_reason": reason, "amount_paid": 249, "currency": "usd",
                                "lines": {"object": "list", "data": [{"period": {"start": start, "end": end}}]},
                                "parent": {"type": "subscription_details", "subscription_details": {
                                    "subscription": subscription, "metadata": {"kiosk_account_id": account, "kiosk_product_id": plan}}},
                                "payments": {"object": "list", "data": [{"payment": {"type": "payment_intent", "payment_intent": f"pi_walk_{number}"}}]}}}}


def main():
    parser = argparse.ArgumentParser()
    for name in ("--store", "--email", "--password", "--plan", "--first-issue-title", "--second-issue-title", "--periods",
                 "--webhook-secret", "--stripe-record", "--download", "--screenshots"):
        parser.add_argument(name, required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    store = args.store.rstrip("/")
    start, first_end, second_end = (int(x) for x in args.periods.split(","))
    failures = []

    def check(condition, what):
        print(("ok    " if condition else "FAIL  ") + what, flush=True)
        if not condition:
            failures.append(what)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        reader = browser.new_context(java_script_enabled=False, accept_downloads=True, viewport=PHONE)
        page = reader.new_page()
        # Stripe's hosted checkout, which this machine cannot reach: a page standing in for it.

        def shot(name):
            page.screenshot(path=f"{args.screenshots}/{name}.png", full_page=True)

        # The plan's page, then subscribing: sign in first, come back, pay on Stripe.
        page.goto(store + "/products/" + args.plan)
        check(page.get_by_text("2.49").first.is_visible(), "the plan's page shows its price")
        shot("plan")
        page.get_by_role("link", name="Subscribe").first.click()
        page.get_by_label("Email", exact=True).fill(args.email)
        page.get_by_label("Password", exact=True).fill(args.password)
        page.get_by_role("button", name="Sign in").click()
        check(page.url.endswith("/account/buy/" + args.plan), "the sign-in comes back to the plan")
        with page.expect_response(lambda r: r.request.method == "POST" and "/account/buy/" in r.url) as answer:
            page.get_by_role("button", name="Pay").click()
        location = answer.value.headers.get("location", "")
        check(answer.value.status == 303 and location.startswith("https://checkout.stripe.com/c/pay/"), f"paying goes to Stripe's checkout ({location})")
        # That tab is at Stripe (unreachable here); the reader comes back in a new one, still signed in.
        page.close()
        page = reader.new_page()

        # Back at the library before Stripe's event: waiting, nothing granted on the redirect.
        page.goto(store + "/account/library")
        check(page.get_by_text("Waiting for the payment").first.is_visible(), "the library says the payment is on its way")
        check(page.get_by_role("link", name="Download " + args.first_issue_title).count() == 0, "nothing is granted by coming back")

        # Stripe's events, in the order Stripe happens to send them: the first invoice, then the session.
        sent = [json.loads(line) for line in open(args.stripe_record, encoding="utf-8") if line.strip()]
        session = [r for r in sent if r["path"] == "/v1/checkout/sessions"][-1]
        form = dict(session["fields"])
        check(form.get("mode") == "subscription", "Kiosk made a subscription-mode Checkout Session")
        account, intent = form["client_reference_id"], form["metadata[kiosk_intent]"]
        subscription = "sub_walk_1"
        first = post_event(store, args.webhook_secret, invoice(1, subscription, account, args.plan, start, first_end, "subscription_create"))
        check(first.get("outcome") == "granted", f"the first invoice grants the first period ({first.get('outcome')})")
        completed = post_event(store, args.webhook_secret, {
            "id": "evt_walk_session", "object": "event", "type": "checkout.session.completed", "created": int(time.time()),
            "data": {"object": {"id": "cs_test_standin000001", "object": "checkout.session", "mode": "subscription", "payment_status": "paid",
                                "client_reference_id": account, "amount_total": 249, "currency": "usd", "subscription": subscription,
                                "invoice": "in_walk_1", "metadata": {"kiosk_intent": intent, "kiosk_product_id": args.plan}}}})
        check(completed.get("transactionId") == first.get("transactionId"), "the session's event is the same purchase")
        page.reload()
        check(page.get_by_role("link", name="Download " + args.first_issue_title).is_visible(), "an issue of the first period is in the library")
        check(page.get_by_role("link", name="Download " + args.second_issue_title).count() == 0, "an issue of the next period is not, yet")
        check(page.get_by_text("Waiting for the payment").count() == 0, "the payment is no longer waiting")
        shot("library-first-period")

        # Stripe renews it: the next invoice paid.
        renewed = post_event(store, args.webhook_secret, invoice(2, subscription, account, args.plan, first_end, second_end, "subscription_cycle"))
        check(renewed.get("outcome") == "granted", f"the next invoice renews it ({renewed.get('outcome')})")
        page.reload()
        link = page.get_by_role("link", name="Download " + args.second_issue_title)
        check(link.is_visible(), "an issue of the second period is in the library")
        shot("library-second-period")
        with page.expect_download() as waiting:
            link.click()
        waiting.value.save_as(args.download)
        check(waiting.value.suggested_filename != "", f"the issue is downloaded ({waiting.value.suggested_filename})")

        judge = browser.new_context(bypass_csp=True, viewport=PHONE, storage_state=reader.storage_state()).new_page()
        judge.goto(store + "/account/library")
        violations = Axe().run(judge).response.get("violations", [])
        serious = [f"{v['id']} ({v['impact']})" for v in violations if v.get("impact") in ("serious", "critical")]
        check(not serious, "axe finds no serious or critical violation on the subscriber's library" + (": " + ", ".join(serious) if serious else ""))
        browser.close()

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
