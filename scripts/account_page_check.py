#!/usr/bin/env python3
"""Drives the reader's account page (/account) in a real browser (Debian's chromium, through
playwright, JavaScript off) the way a reader would, and checks what it shows and does.

    account_page_check.py --store URL --email EMAIL --password PASSWORD --book PRODUCT
                          --user-code CODE --remove DEVICE --screenshots DIR

Takes a screenshot of every page it visits into DIR, prints one line per check, and exits 1
naming every check that failed. AccountPageBrowserTests runs it.
"""
import argparse
import json
import sys

from playwright.sync_api import sync_playwright


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--email", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--book", required=True, help="a product the account owns")
    parser.add_argument("--user-code", required=True, help="a device code waiting for approval")
    parser.add_argument("--remove", required=True, help="the name of a device to remove")
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
        context = browser.new_context(java_script_enabled=False, accept_downloads=True)
        page = context.new_page()
        outside = []
        page.on("request", lambda request: outside.append(request.url) if not request.url.startswith(store) else None)

        def shot(name):
            page.screenshot(path=f"{args.screenshots}/{name}.png", full_page=True)

        def sign_in(password):
            page.get_by_label("Email", exact=True).fill(args.email)
            page.get_by_label("Password", exact=True).fill(password)
            with page.expect_navigation() as navigation:
                page.get_by_role("button", name="Sign in").click()
            return navigation.value

        # Signing in: a wrong password is refused and says so; the right one opens the account.
        page.goto(store + "/account")
        check(page.get_by_role("heading", name="Sign in").is_visible(), "without a session /account asks to sign in")
        shot("sign-in")
        response = sign_in("not the password at all")
        check(response.status == 401 and page.get_by_role("alert").is_visible(), "a wrong password is refused with 401 and says so")
        check("the email or the password is wrong" in page.get_by_role("alert").inner_text(), "the refusal names neither which was wrong")
        sign_in(args.password)
        check(page.get_by_role("heading", name="Your account").is_visible(), "the right password opens the account")
        check(args.email in page.content(), "the account shows its email")
        check(page.get_by_text(args.book).is_visible(), "the purchase is listed")
        cookies = [cookie for cookie in context.cookies() if cookie["name"] == "kiosk_account"]
        check(len(cookies) == 1 and cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict" and cookies[0]["path"] == "/account",
              f"the session cookie is HttpOnly, SameSite=Strict, on /account ({cookies})")
        shot("account")
        check(cookies and cookies[0]["expires"] == -1, "the session cookie ends with the browser")
        check(page.locator("meta[http-equiv]").count() == 0 and page.url.startswith(store),
              "a device named with HTML (a < joined to the letter before it) shows as text, not markup")
        check("<meta http-equiv=refresh" in page.get_by_role("table").first.inner_text() or "meta http-equiv" in page.content().replace("&lt;", "<"),
              "the hostile name is listed, escaped")
        api = context.request.get(store + "/v1/account", headers={"Authorization": "Bearer " + cookies[0]["value"]})
        check(api.status == 401, f"the page's session is not an API token ({api.status})")
        crossed = context.request.post(store + "/account/sign-in", headers={"Origin": "http://127.0.0.1:1"},
                                       form={"email": args.email, "password": args.password, "csrf": "x", "next": "/account"})
        check(crossed.status == 403, f"a form from another origin is refused ({crossed.status})")

        # A form without the session's CSRF token is refused, whatever the cookie.
        forged = context.request.post(store + "/account/devices/remove", form={"device": args.remove, "csrf": "0" * 64})
        check(forged.status == 403, f"a form with a forged CSRF token is refused ({forged.status})")
        check(args.remove in page.content(), "the forged form removed nothing")

        # Cancelling a subscription's auto-renew.
        page.get_by_role("button", name="Cancel auto-renew").first.click()
        check(page.get_by_role("status").is_visible() and "will not renew" in page.get_by_role("status").inner_text(), "auto-renew is cancelled and the page says until when")
        check(page.get_by_role("button", name="Cancel auto-renew").count() == 0, "no subscription renews any more")

        # Approving the code a TV shows.
        page.get_by_label("The code the device shows").fill(args.user_code.lower())
        page.get_by_role("button", name="Approve").click()
        check("Approved" in page.get_by_role("status").inner_text(), "the device code is approved")

        # Removing a device.
        page.get_by_role("button", name=f"Remove {args.remove}").click()
        check("is signed out" in page.get_by_role("status").inner_text(), "the device is removed and the page says so")
        check(page.get_by_role("button", name=f"Remove {args.remove}").count() == 0, "the removed device is no longer listed")
        shot("account-after")

        # Export: one JSON document with the account's email and no secret.
        with page.expect_download() as download_info:
            page.get_by_role("link", name="Download everything the store holds about you").click()
        document = json.load(open(download_info.value.path()))
        check(document.get("signIn", {}).get("email") == args.email, "the export holds the account's sign-in")
        check("$2b$" not in json.dumps(document), "the export holds no password hash")

        # Sign out everywhere: this browser too.
        page.get_by_role("button", name="Sign out everywhere").click()
        check(page.get_by_role("heading", name="Sign in").is_visible(), "signing out everywhere signs this browser out too")
        page.goto(store + "/account")
        check(page.get_by_role("heading", name="Sign in").is_visible(), "the old session no longer opens the account")

        # Deleting: the password again, then the account is gone.
        sign_in(args.password)
        page.get_by_label("Delete the account: your password").fill("not the password at all")
        page.get_by_label("I understand").check()
        page.get_by_role("button", name="Delete my account").click()
        check(page.get_by_role("alert").is_visible(), "a wrong password deletes nothing")
        page.get_by_label("Delete the account: your password").fill(args.password)
        page.get_by_label("I understand").check()
        page.get_by_role("button", name="Delete my account").click()
        check(page.get_by_role("heading", name="Account deleted").is_visible(), "the right password deletes the account")
        shot("deleted")
        page.goto(store + "/account")
        response = sign_in(args.password)
        check(response.status == 401, "the deleted account's email and password sign in no more")

        check(not outside, f"nothing was fetched from elsewhere ({outside})")
        browser.close()

    if failures:
        print(f"{len(failures)} check(s) failed: " + "; ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
