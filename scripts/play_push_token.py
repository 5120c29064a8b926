#!/usr/bin/env python3
"""Plays Google's part for Play's Real-time developer notifications: signs the token a Pub/Sub
authenticated push carries (RS256) with joserfc, an independent JOSE library, so Kiosk's check is
not only against its own signer.

    play_push_token.py jwks KEY.pem KID              prints the public key as a JWKS document
    play_push_token.py token KEY.pem KID AUDIENCE EMAIL SECONDS [ISSUER]
                                                     prints a token for AUDIENCE, valid SECONDS
                                                     (negative: expired that long ago)

PlayChannelTests runs it.
"""
import json
import sys
import time

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey


def key(path, kid):
    with open(path, "rb") as pem:
        return RSAKey.import_key(pem.read(), {"kid": kid, "alg": "RS256", "use": "sig"})


def main():
    command, path, kid = sys.argv[1], sys.argv[2], sys.argv[3]
    rsa = key(path, kid)
    if command == "jwks":
        print(json.dumps(KeySet([rsa]).as_dict(private=False)))
        return
    audience, email, seconds = sys.argv[4], sys.argv[5], int(sys.argv[6])
    issuer = sys.argv[7] if len(sys.argv) > 7 else "https://accounts.google.com"
    now = int(time.time())
    claims = {"iss": issuer, "aud": audience, "azp": "1234567890", "email": email, "email_verified": True,
              "sub": "1234567890", "iat": min(now, now + seconds) - 10, "exp": now + seconds}
    token = jwt.encode({"alg": "RS256", "kid": kid, "typ": "JWT"}, claims, rsa)
    # The same library's check must accept it (signature and claims' types), as Google's token would.
    jwt.decode(token, rsa)
    print(token)


if __name__ == "__main__":
    main()
