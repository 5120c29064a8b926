#!/usr/bin/env python3
"""A stand-in for Stripe's API, for tests on a machine that cannot reach api.stripe.com. It answers
only the documented shapes (https://docs.stripe.com/api/checkout/sessions/create, /api/errors,
/idempotency) and records every request, so a test can hold Kiosk's requests to those the `stripe`
package makes for the same parameters (scripts/stripe_judge.py).

    stripe_standin.py RECORD-FILE [--key sk_…]

Listens on 127.0.0.1 at a port of the system's choosing and prints `listening on http://HOST:PORT`.
Each request is appended to RECORD-FILE as one JSON line: method, path, the headers that matter and
the form's fields as [name, value] pairs in order. What it answers:
- `POST /v1/checkout/sessions`: 401 (`invalid_request_error`) unless `Authorization: Bearer KEY`;
  400 when `mode`, `success_url` or a line item's price is missing; else 200 with a Checkout
  Session (`id` `cs_test_…`, `object`, `url` on checkout.stripe.com, `mode`, `status` `open`,
  `client_reference_id`, `metadata`, `customer_email`, `amount_total`, `currency`). The same
  `Idempotency-Key` with the same fields is answered the same session, as Stripe does; with other
  fields, 400 `idempotency_error`.
- `GET /v1/subscriptions/ID` (https://docs.stripe.com/api/subscriptions/retrieve): 401 and 404 as
  below; else 200 with the subscription, its one item `si_<id>` whose price's product is `prod_<id>`.
- `POST /v1/subscriptions/ID` (https://docs.stripe.com/api/subscriptions/update): 401 as above;
  404 `resource_missing` for an id not shaped `sub_…` or ending `_missing`; 400 for a
  `cancel_at_period_end` that is not `true` or `false`, a `proration_behavior` other than
  `create_prorations`, `none` or `always_invoice`, a `billing_cycle_anchor` other than `now` or
  `unchanged`, an item that is not the subscription's, or an item's `price_data` without its
  `currency`, `product`, `unit_amount` (a whole number) or `recurring[interval]` (day, week, month,
  year); else 200 with the subscription (`id`, `object`, `status` `active`, `cancel_at_period_end`,
  its item and `metadata`).
- `POST /v1/coupons` (https://docs.stripe.com/api/coupons/create): 401 as above; 400 unless exactly
  one of `percent_off` (above 0, at most 100) and `amount_off` (a whole number, with `currency`),
  a `duration` of `once`, `repeating` (with `duration_in_months`) or `forever`; else 200 with the
  coupon (`id` `coupon_…`, `object`, the fields). A Checkout Session's `discounts[0][coupon]`
  must name one made here.
- anything else: 404 with Stripe's error shape.
"""
import argparse
import hashlib
import http.server
import json
import sys
import threading
import urllib.parse


class Recorder:
    def __init__(self, path, key):
        self.path = path
        self.key = key
        self.lock = threading.Lock()
        self.sessions = {}  # idempotency key -> (fields digest, session)
        self.coupons = set()
        self.count = 0


def error(kind, message, code=None, param=None):
    body = {"error": {"type": kind, "message": message}}
    if code:
        body["error"]["code"] = code
    if param:
        body["error"]["param"] = param
    return body


def make_handler(recorder):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Request-Id", "req_standin")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            record = {"method": "GET", "path": self.path, "authorization": self.headers.get("Authorization"),
                      "idempotencyKey": self.headers.get("Idempotency-Key"), "contentType": self.headers.get("Content-Type"), "fields": []}
            with recorder.lock:
                with open(recorder.path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")
            if not (self.path.startswith("/v1/subscriptions/") and self.path.count("/") == 3):
                return self.answer(404, error("invalid_request_error", f"Unrecognized request URL (GET: {self.path})."))
            if self.headers.get("Authorization") != f"Bearer {recorder.key}":
                return self.answer(401, error("invalid_request_error", "Invalid API Key provided: sk_****"))
            subscription_id = urllib.parse.unquote(self.path.rsplit("/", 1)[1])
            if not subscription_id.startswith("sub_") or subscription_id.endswith("_missing"):
                return self.answer(404, error("invalid_request_error", f"No such subscription: '{subscription_id}'", "resource_missing", "id"))
            self.answer(200, subscription_body(subscription_id, {}))

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            fields = urllib.parse.parse_qsl(raw, keep_blank_values=True)
            record = {
                "method": "POST", "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "idempotencyKey": self.headers.get("Idempotency-Key"),
                "contentType": self.headers.get("Content-Type"),
                "fields": fields,
            }
            with recorder.lock:
                with open(recorder.path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")
            subscription = self.path.startswith("/v1/subscriptions/") and self.path.count("/") == 3
            if self.path == "/v1/coupons":
                if self.headers.get("Authorization") != f"Bearer {recorder.key}":
                    return self.answer(401, error("invalid_request_error", "Invalid API Key provided: sk_****"))
                return self.create_coupon(dict(fields))
            if self.path != "/v1/checkout/sessions" and not subscription:
                return self.answer(404, error("invalid_request_error", f"Unrecognized request URL (POST: {self.path})."))
            if self.headers.get("Authorization") != f"Bearer {recorder.key}":
                return self.answer(401, error("invalid_request_error", "Invalid API Key provided: sk_****"))
            form = dict(fields)
            if subscription:
                return self.update_subscription(urllib.parse.unquote(self.path.rsplit("/", 1)[1]), form)
            for required in ("mode", "success_url"):
                if required not in form:
                    return self.answer(400, error("invalid_request_error", f"Missing required param: {required}.", "parameter_missing", required))
            if "line_items[0][price_data][unit_amount]" not in form and "line_items[0][price]" not in form:
                return self.answer(400, error("invalid_request_error", "You must specify either `price` or `price_data` for each line item.",
                                              "parameter_missing", "line_items[0][price_data]"))
            coupon = form.get("discounts[0][coupon]")
            if coupon is not None and coupon not in recorder.coupons:
                return self.answer(400, error("invalid_request_error", f"No such coupon: '{coupon}'", "resource_missing", "discounts[0][coupon]"))
            digest = hashlib.sha256(json.dumps(sorted(fields)).encode()).hexdigest()
            key = self.headers.get("Idempotency-Key")
            with recorder.lock:
                if key and key in recorder.sessions:
                    earlier_digest, session = recorder.sessions[key]
                    if earlier_digest != digest:
                        return self.answer(400, error("idempotency_error", "Keys for idempotent requests can only be used with the same parameters they were first used with."))
                    return self.answer(200, session)
                recorder.count += 1
                number = recorder.count
            session_id = f"cs_test_standin{number:06d}"
            amount = int(form.get("line_items[0][price_data][unit_amount]", "0")) * int(form.get("line_items[0][quantity]", "1"))
            session = {
                "id": session_id, "object": "checkout.session", "mode": form["mode"], "status": "open", "payment_status": "unpaid",
                "url": f"https://checkout.stripe.com/c/pay/{session_id}",
                "client_reference_id": form.get("client_reference_id"), "customer_email": form.get("customer_email"),
                "amount_total": amount, "currency": form.get("line_items[0][price_data][currency]"),
                "success_url": form["success_url"], "cancel_url": form.get("cancel_url"),
                "metadata": {name[len("metadata["):-1]: value for name, value in fields if name.startswith("metadata[")},
            }
            with recorder.lock:
                if key:
                    recorder.sessions[key] = (digest, session)
            self.answer(200, session)

        def create_coupon(self, form):
            percent, amount = form.get("percent_off"), form.get("amount_off")
            if (percent is None) == (amount is None):
                return self.answer(400, error("invalid_request_error", "Exactly one of percent_off and amount_off is required.", "parameter_missing"))
            if percent is not None and not (0 < float(percent) <= 100):
                return self.answer(400, error("invalid_request_error", "Invalid percent_off", "parameter_invalid_integer", "percent_off"))
            if amount is not None and (not amount.isdigit() or "currency" not in form):
                return self.answer(400, error("invalid_request_error", "amount_off needs a whole number and a currency", "parameter_missing", "currency"))
            duration = form.get("duration", "once")
            if duration not in ("once", "repeating", "forever") or (duration == "repeating") != ("duration_in_months" in form):
                return self.answer(400, error("invalid_request_error", "Invalid duration", "parameter_invalid_string", "duration"))
            with recorder.lock:
                recorder.count += 1
                coupon_id = f"coupon_standin{recorder.count:06d}"
                recorder.coupons.add(coupon_id)
            self.answer(200, {"id": coupon_id, "object": "coupon", "duration": duration, "percent_off": float(percent) if percent else None,
                              "amount_off": int(amount) if amount else None, "currency": form.get("currency")})

        def update_subscription(self, subscription_id, form):
            # https://docs.stripe.com/api/subscriptions/update: a subscription not made here is
            # Stripe's 404 (resource_missing); cancel_at_period_end must be a boolean.
            if not subscription_id.startswith("sub_") or subscription_id.endswith("_missing"):
                return self.answer(404, error("invalid_request_error", f"No such subscription: '{subscription_id}'", "resource_missing", "id"))
            value = form.get("cancel_at_period_end")
            if value not in (None, "true", "false"):
                return self.answer(400, error("invalid_request_error", "Invalid boolean: " + value, "parameter_invalid_boolean", "cancel_at_period_end"))
            if form.get("proration_behavior") not in (None, "create_prorations", "none", "always_invoice"):
                return self.answer(400, error("invalid_request_error", "Invalid proration_behavior", "parameter_invalid_string", "proration_behavior"))
            if form.get("billing_cycle_anchor") not in (None, "now", "unchanged"):
                return self.answer(400, error("invalid_request_error", "Invalid billing_cycle_anchor", "parameter_invalid_string", "billing_cycle_anchor"))
            if "items[0][id]" in form or any(name.startswith("items[") for name in form):
                if form.get("items[0][id]") != f"si_{subscription_id}":
                    return self.answer(400, error("invalid_request_error", "No such subscription item", "resource_missing", "items[0][id]"))
                for part in ("currency", "product", "unit_amount", "recurring][interval"):
                    if f"items[0][price_data][{part}]" not in form:
                        return self.answer(400, error("invalid_request_error", f"Missing required param: items[0][price_data][{part}].", "parameter_missing"))
                if not form["items[0][price_data][unit_amount]"].isdigit() or form["items[0][price_data][recurring][interval]"] not in ("day", "week", "month", "year"):
                    return self.answer(400, error("invalid_request_error", "Invalid price_data", "parameter_invalid_integer", "items[0][price_data]"))
            body = subscription_body(subscription_id, form)
            body["cancel_at_period_end"] = value == "true"
            self.answer(200, body)

    return Handler


def subscription_body(subscription_id, form):
    """A subscription as Stripe's API answers it: its one item, the item's price and product, and its metadata."""
    return {"id": subscription_id, "object": "subscription", "status": "active", "cancel_at_period_end": False,
            "items": {"object": "list", "data": [{"id": f"si_{subscription_id}", "object": "subscription_item",
                                                   "price": {"id": f"price_{subscription_id}", "object": "price", "product": f"prod_{subscription_id}",
                                                             "unit_amount": int(form.get("items[0][price_data][unit_amount]", "249") or 0),
                                                             "currency": form.get("items[0][price_data][currency]", "usd")}}]},
            "metadata": {name[len("metadata["):-1]: value for name, value in form.items() if name.startswith("metadata[")}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("record")
    parser.add_argument("--key", default="sk_live_kiosk_standin")
    args = parser.parse_args()
    recorder = Recorder(args.record, args.key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorder))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
