#!/usr/bin/env python3
"""Verifies Kiosk's signed notifications with an independent JOSE library (joserfc).

usage: verify_notifications.py JWKS_FILE BODIES_FILE
BODIES_FILE holds one POSTed body a line: {"signedPayload": "<JWS>"}. Each signedPayload, and the
signedRenewalInfo inside it, must verify against the JWKS. Prints one line per notification:
notificationUUID, notificationType, and exits 1 on the first that does not verify.
"""
import json
import sys

from joserfc import jws
from joserfc.jwk import KeySet

# Kiosk signs with Ed25519 (JWS "EdDSA"); joserfc wants algorithms outside its defaults named.
ALGORITHMS = ["EdDSA", "ES256"]


def verify(token, keys):
    compact = jws.deserialize_compact(token, keys, algorithms=ALGORITHMS)
    return json.loads(compact.payload)


def main():
    with open(sys.argv[1]) as f:
        document = json.load(f)
    keys = KeySet.import_key_set({"keys": document["keys"]})
    count = 0
    with open(sys.argv[2]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            body = json.loads(line)
            payload = verify(body["signedPayload"], keys)
            data = payload.get("data", {})
            if data.get("signedRenewalInfo"):
                verify(data["signedRenewalInfo"], keys)
            if data.get("signedTransactionInfo"):
                verify(data["signedTransactionInfo"], keys)
            print(payload["notificationUUID"], payload["notificationType"])
            count += 1
    print(f"verified {count}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # one line for the test's failure message
        print(f"verification failed: {error}", file=sys.stderr)
        sys.exit(1)
