#!/usr/bin/env python3
"""Signs a webhook body the way Stripe does, with Stripe's own library (the `stripe` package from
PyPI), so Kiosk's check of the web channel's events is tested against the payment service's code
rather than only its own signer.

    stripe_sign.py BODY-FILE SECRET [TIMESTAMP]

Prints the `Stripe-Signature` header's value. StripeChannelTests runs it.
"""
import sys

import stripe


def main():
    body = open(sys.argv[1], encoding="utf-8").read()
    secret = sys.argv[2]
    timestamp = int(sys.argv[3]) if len(sys.argv) > 3 else None
    header = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=timestamp)
    # The same library's verification must accept it: the header is what Stripe would send.
    stripe.WebhookSignature.verify_header(body, header, secret, tolerance=None if timestamp else 300)
    print(header)


if __name__ == "__main__":
    main()
