#!/usr/bin/env python3
"""A stand-in for Google's OAuth token endpoint and the Android Publisher API's
purchases.subscriptionsv2, for tests on a machine that cannot reach Google. It answers only the
documented shapes and judges Kiosk's service-account assertion with joserfc, an independent JOSE
library: a token is issued only for an RS256 JWT that joserfc verifies under the service account's
public key, with the claims Google requires (https://developers.google.com/identity/protocols/oauth2/service-account#jwt-auth).

    play_standin.py RECORD-FILE PUBLIC-KEY.pem CLIENT-EMAIL

Listens on 127.0.0.1 at a port of the system's choosing and prints `listening on http://HOST:PORT`;
the token endpoint is http://HOST:PORT/token. Each request is appended to RECORD-FILE as one JSON
line (method, path, and for the token endpoint the assertion's verified header and claims, or why
it was refused).
- `POST /token` (grant_type urn:ietf:params:oauth:grant-type:jwt-bearer): 200
  {"access_token", "expires_in": 3599, "token_type": "Bearer"}; 400 {"error": "invalid_grant",
  "error_description"} for an assertion that is not RS256, not signed by the key, or whose iss,
  scope, aud, iat or exp are not as Google requires.
- `GET /androidpublisher/v3/applications/PACKAGE/purchases/subscriptionsv2/tokens/TOKEN`: 401
  (Google's error shape, UNAUTHENTICATED) without a token issued here; 404 for a token it holds no
  subscription for; else 200 with the SubscriptionPurchaseV2 the test set.
- `PUT /standin/subscriptions/TOKEN` (the test's control, not Google's): sets that subscription.
- `POST /standin/revoke-tokens` (the test's control): forgets every issued access token.
"""
import json
import sys
import threading
import time
import urllib.parse
import http.server

from joserfc import jwt
from joserfc.jwk import RSAKey

SCOPE = "https://www.googleapis.com/auth/androidpublisher"


class State:
    def __init__(self, record, key, email):
        self.record = record
        self.key = key
        self.email = email
        self.lock = threading.Lock()
        self.tokens = set()
        self.subscriptions = {}
        self.issued = 0


def make_handler(state):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def note(self, entry):
            with state.lock:
                with open(state.record, "a", encoding="utf-8") as out:
                    out.write(json.dumps(entry) + "\n")

        def body(self):
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))

        def do_POST(self):
            if self.path == "/standin/revoke-tokens":
                self.body()
                with state.lock:
                    state.tokens.clear()
                return self.answer(200, {})
            if self.path != "/token":
                return self.answer(404, {"error": {"code": 404, "message": "Not Found", "status": "NOT_FOUND"}})
            form = dict(urllib.parse.parse_qsl(self.body().decode(), keep_blank_values=True))
            entry = {"method": "POST", "path": "/token", "grantType": form.get("grant_type")}
            try:
                if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                    raise ValueError("grant_type must be urn:ietf:params:oauth:grant-type:jwt-bearer")
                token = jwt.decode(form.get("assertion", ""), state.key, algorithms=["RS256"])
                claims = token.claims
                entry["header"] = token.header
                entry["claims"] = claims
                now = int(time.time())
                if token.header.get("alg") != "RS256":
                    raise ValueError("the assertion must be RS256")
                if claims.get("iss") != state.email:
                    raise ValueError("iss is not the service account's email")
                if SCOPE not in str(claims.get("scope", "")).split():
                    raise ValueError("scope lacks " + SCOPE)
                if claims.get("aud") != f"http://127.0.0.1:{self.server.server_address[1]}/token":
                    raise ValueError("aud is not the token endpoint")
                if not isinstance(claims.get("iat"), int) or not isinstance(claims.get("exp"), int):
                    raise ValueError("iat and exp must be whole seconds")
                iat, exp = claims["iat"], claims["exp"]
                if not (iat - 300 <= now <= exp + 300) or exp - iat > 3600:
                    raise ValueError("iat and exp must span at most an hour around now")
            except Exception as refusal:  # joserfc's own refusals (bad signature, malformed) land here too
                entry["refused"] = str(refusal) or type(refusal).__name__
                self.note(entry)
                return self.answer(400, {"error": "invalid_grant", "error_description": entry["refused"]})
            with state.lock:
                state.issued += 1
                access = f"ya29.standin-{state.issued}"
                state.tokens.add(access)
            self.note(entry)
            self.answer(200, {"access_token": access, "expires_in": 3599, "token_type": "Bearer"})

        def do_PUT(self):
            prefix = "/standin/subscriptions/"
            if not self.path.startswith(prefix):
                return self.answer(404, {})
            token = urllib.parse.unquote(self.path[len(prefix):])
            with state.lock:
                state.subscriptions[token] = json.loads(self.body())
            self.answer(200, {})

        def do_GET(self):
            parts = self.path.split("/")
            # /androidpublisher/v3/applications/PACKAGE/purchases/subscriptionsv2/tokens/TOKEN
            if len(parts) != 9 or parts[1:4] != ["androidpublisher", "v3", "applications"] or parts[5:8] != ["purchases", "subscriptionsv2", "tokens"]:
                return self.answer(404, {"error": {"code": 404, "message": "Not Found", "status": "NOT_FOUND"}})
            bearer = self.headers.get("Authorization", "")
            self.note({"method": "GET", "path": self.path, "authorized": bearer.startswith("Bearer ")})
            with state.lock:
                known = bearer[len("Bearer "):] in state.tokens
                subscription = state.subscriptions.get(urllib.parse.unquote(parts[8]))
            if not known:
                return self.answer(401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}})
            if subscription is None:
                return self.answer(404, {"error": {"code": 404, "message": "The purchase token was not found.", "status": "NOT_FOUND"}})
            self.answer(200, dict(subscription, kind="androidpublisher#subscriptionPurchaseV2"))

    return Handler


def main():
    record, key_path, email = sys.argv[1:4]
    with open(key_path, "rb") as pem:
        key = RSAKey.import_key(pem.read())
    state = State(record, key, email)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
