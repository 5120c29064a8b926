#!/usr/bin/env python3
"""Sends a Checkout Session's creation through Stripe's own library (the `stripe` package), so a
test can hold the form fields Kiosk sends to those Stripe's library sends for the same parameters.

    stripe_judge.py API-BASE KEY PARAMS-FILE IDEMPOTENCY-KEY [SUBSCRIPTION-ID]

With SUBSCRIPTION-ID it updates that subscription instead (`subscriptions.update`), as the
reader's auto-renew change does; with `--coupon` in its place it makes a coupon (`coupons.create`).

PARAMS-FILE holds the parameters as JSON, as Stripe's API reference writes them (nested objects
and lists). The request goes to API-BASE (the stand-in, scripts/stripe_standin.py), which records
it; prints the session's id.
"""
import json
import sys

import stripe


def main():
    api_base, key, params_file, idempotency_key = sys.argv[1:5]
    params = json.load(open(params_file, encoding="utf-8"))
    client = stripe.StripeClient(key, base_addresses={"api": api_base}, max_network_retries=0)
    options = {"idempotency_key": idempotency_key}
    if len(sys.argv) > 5 and sys.argv[5] == "--coupon":
        print(client.v1.coupons.create(params=params, options=options).id)
        return
    if len(sys.argv) > 5:
        print(client.v1.subscriptions.update(sys.argv[5], params=params, options=options).id)
        return
    session = client.v1.checkout.sessions.create(params=params, options=options)
    print(session.id)


if __name__ == "__main__":
    main()
