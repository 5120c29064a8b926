#!/usr/bin/env python3
"""Signs a webhook body the way Stripe does, with Stripe's own library (the `stripe` package from
PyPI), so Kiosk's check of the web channel's events is tested against the payment service's code
rather than only its own signer.

    stripe_sign.py BODY-FILE SECRET [TIMESTAMP]
    stripe_sign.py --serve

The first form prints the `Stripe-Signature` header's value. The second signs one request a line
from standard input, {"body": …, "secret": …, "timestamp": null or seconds}, and answers a line
{"header": …} or {"error": …}, until standard input ends: the tests keep one running (StripeSigner),
as Python's start and `import stripe` took 0.4 s a signature.
"""
import json
import sys

import stripe


def sign(body, secret, timestamp):
    header = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=timestamp)
    # The same library's verification must accept it: the header is what Stripe would send.
    stripe.WebhookSignature.verify_header(body, header, secret, tolerance=None if timestamp else 300)
    return header


def serve():
    for line in sys.stdin:
        try:
            request = json.loads(line)
            answer = {"header": sign(request["body"], request["secret"], request.get("timestamp"))}
        except Exception as error:  # the test that asked reads the reason
            answer = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def main():
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    body = open(sys.argv[1], encoding="utf-8").read()
    timestamp = int(sys.argv[3]) if len(sys.argv) > 3 else None
    print(sign(body, sys.argv[2], timestamp))


if __name__ == "__main__":
    main()
