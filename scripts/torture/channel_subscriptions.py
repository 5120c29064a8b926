"""Subscriptions sold through the channels during the history (issue 63): the plan bought on the web
(Stripe Billing's events: the paid session and its first invoice, in either order; each cycle's
invoice paid or failed; auto-renew turned by the subscription's updates; the subscription deleted;
a renewal's invoice refunded) and on Android (a Play subscription presented by the app, then its
Real-time developer notifications as the subscription's state at a stand-in for Google's Android
Publisher API moves: renewed, cancelled, restarted). Each event or presentation is delivered as
channels.py delivers: once, twice, twice at once, late, cut off. Stripe's events are signed as
channels.py signs them; Play's pushes carry a token joserfc signs, and the stand-in issues the
store an access token only for a service-account assertion joserfc verifies.

What the history did is kept in `world.channel_subs` for checks/channel_subscriptions.py: each
subscription's channel, account, the payments it made (their grant keys) and, for Play, the
expiry the stand-in says last."""
import datetime, json, subprocess, threading, time

from . import channels, stores
from .common import ROOT, SUBSCRIPTION

PLAY_PLAN = channels.PLAY_PREFIX + SUBSCRIPTION
AUDIENCE = "https://torture.example/v1/play/notifications"
PUSH_ACCOUNT = "rtdn@torture-project.iam.gserviceaccount.com"
SERVICE_ACCOUNT = "kiosk@torture-project.iam.gserviceaccount.com"
VENV_PYTHON = ROOT / ".build/venv/bin/python"
MONTH = 30 * 86400


def prepare(world):
    """The plan's Play ID, the service account's key, Google's push-token key, and the stand-in."""
    for file in (world.store / "Catalog").glob("*.json"):
        document = json.loads(file.read_text())
        for product in document["products"]:
            if product["id"] == SUBSCRIPTION:
                product["playProductId"] = PLAY_PLAN
        file.write_text(json.dumps(document, indent=2))
    if not VENV_PYTHON.exists():
        raise SystemExit(f"torture: no {VENV_PYTHON} (joserfc and stripe): run make test-tools")
    keys = world.work / "google"
    keys.mkdir()
    for name in ("account", "push"):
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(keys / f"{name}.pem")],
                       check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(keys / "account.pem"), "-pubout", "-out", str(keys / "account.pub.pem")], check=True, capture_output=True)
    jwks = subprocess.run([str(VENV_PYTHON), str(ROOT / "scripts/play_push_token.py"), "jwks", str(keys / "push.pem"), "push-1"],
                          check=True, capture_output=True, text=True).stdout
    (keys / "jwks.json").write_text(jwks)
    world.google = keys
    world.play_standin = subprocess.Popen([str(VENV_PYTHON), str(ROOT / "scripts/play_standin.py"), str(world.logs / "play-standin.jsonl"),
                                           str(keys / "account.pub.pem"), SERVICE_ACCOUNT],
                                          stdout=subprocess.PIPE, stderr=open(world.logs / "play-standin.log", "w"), text=True)
    line = world.play_standin.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit("torture: the Play stand-in did not start; see play-standin.log")
    world.play_api = line.split()[2]
    (keys / "service-account.json").write_text(json.dumps({
        "type": "service_account", "project_id": "torture-project", "private_key_id": "torture-key-1",
        "private_key": (keys / "account.pem").read_text(), "client_email": SERVICE_ACCOUNT, "token_uri": world.play_api + "/token"}))
    world.channel_subs = {}


def server_flags(world):
    return ["--play-service-account", str(world.google / "service-account.json"), "--play-api-url", world.play_api,
            "--play-notification-jwks", str(world.google / "jwks.json"), "--play-notification-audience", AUDIENCE]


def stop(world):
    process = getattr(world, "play_standin", None)
    if process and process.poll() is None:
        process.kill()
        process.wait()


def op(world):
    rng = world.rng
    web = [s for s in world.channel_subs.values() if s["channel"] == "web" and not s["ended"]]
    play = [s for s in world.channel_subs.values() if s["channel"] == "play" and not s["ended"]]
    kinds = ["web-subscribe", "play-subscribe"] + (["web-renew", "web-renew", "web-fail", "web-autorenew", "web-end", "web-refund"] if web else []) \
        + (["play-renew", "play-renew", "play-autorenew"] if play else [])
    kind = rng.choice(kinds)
    home = rng.choice(["a", "b", "c"])
    op = {"index": len(world.ops), "kind": kind, "home": home, "argv": [], "start": time.time(), "end": None, "exit": None}
    world.ops.append(op)
    serial = f"{world.args.seed}-{op['index']}"
    if kind == "web-subscribe":
        account, _ = world.account_of(home)
        if account is None:
            op["exit"], op["end"] = "no account", time.time()
            return
        sub = f"sub_t{serial}"
        world.channel_subs[sub] = {"channel": "web", "id": sub, "account": account, "payments": {f"stripe:{sub}": None}, "invoices": 0,
                                   "ended": False, "paid": {}}
        op["argv"] = [sub]
        start = int(time.time())
        events = [session_event(serial, sub, account), invoice_event(f"{sub}_0", sub, account, start, start + MONTH, "subscription_create")]
        rng.shuffle(events)
        for body in events:
            deliver_stripe(world, op, world.channel_subs[sub], f"stripe:{sub}", body)
    elif kind.startswith("web-"):
        s = rng.choice(web)
        op["argv"] = [s["id"]]
        row = linked_row(world, "stripe", s["id"])
        if row is None:
            op["exit"], op["end"] = "not granted yet", time.time()
            return
        if kind in ("web-renew", "web-fail"):
            s["invoices"] += 1
            number = s["invoices"]
            end = seconds(row["expiresDate"])
            invoice = f"{s['id']}_{number}"
            body = invoice_event(invoice, s["id"], s["account"], int(end), int(end) + MONTH, "subscription_cycle",
                                 failed=kind == "web-fail")
            deliver_stripe(world, op, s, None if kind == "web-fail" else f"stripe:in_{invoice}", body)
        elif kind == "web-autorenew":
            body = json.dumps({"id": f"evt_t{serial}u", "object": "event", "type": "customer.subscription.updated", "created": int(time.time()),
                               "data": {"object": {"id": s["id"], "object": "subscription", "status": "active",
                                                   "cancel_at_period_end": rng.random() < 0.5}}}, sort_keys=True)
            deliver_stripe(world, op, s, None, body)
        elif kind == "web-end":
            s["ended"] = True
            body = json.dumps({"id": f"evt_t{serial}d", "object": "event", "type": "customer.subscription.deleted", "created": int(time.time()),
                               "data": {"object": {"id": s["id"], "object": "subscription", "status": "canceled", "cancel_at_period_end": False}}},
                              sort_keys=True)
            deliver_stripe(world, op, s, "end", body)
        else:
            paid = [invoice for invoice, intent in s["paid"].items() if intent]
            if not paid:
                op["exit"], op["end"] = "no renewal to refund", time.time()
                return
            invoice = rng.choice(paid)
            s["refunded"] = s.get("refunded", set()) | {invoice}
            deliver_stripe(world, op, s, None, channels.refund_event(f"{serial}", "charge.refunded").replace(f"pi_t{serial}", s["paid"][invoice]))
    elif kind == "play-subscribe":
        account, token = world.account_of(home)
        if account is None:
            op["exit"], op["end"] = "no account", time.time()
            return
        purchase_token = f"subtok-{serial}.AO-J1O"
        start = int(time.time())
        s = {"channel": "play", "id": purchase_token, "account": account, "home": home, "expiry": start + MONTH, "ended": False,
             "notified": {}, "autoRenew": True}
        world.channel_subs[purchase_token] = s
        op["argv"] = [purchase_token]
        set_play(world, s, start)
        text = (f'{{"orderId":"GPA.{serial}","packageName":"{channels.PLAY_PACKAGE}","productId":"{PLAY_PLAN}",'
                f'"purchaseTime":{start * 1000},"purchaseState":0,"purchaseToken":"{purchase_token}","quantity":1,"autoRenewing":true,"acknowledged":false}}')
        signature = channels.play_sign(world, text)
        channels.deliver(world, op, lambda cut=False: channels.play_delivery(world, token, text, signature, cut),
                         rng.choice(["once", "twice", "at-once", "late", "cut"]))
    else:
        s = rng.choice(play)
        op["argv"] = [s["id"]]
        if linked_row(world, "play", stores_reference(s["id"])) is None:
            op["exit"], op["end"] = "not presented yet", time.time()
            return
        if kind == "play-renew":
            s["expiry"] += MONTH
            kind_number = 2
        else:
            s["autoRenew"] = not s["autoRenew"]
            kind_number = 7 if s["autoRenew"] else 3
        set_play(world, s, None)
        message = f"m-{serial}"
        s["notified"][message] = (s["expiry"], s["autoRenew"])
        body = push_body(world, s["id"], kind_number, message)

        def send(cut=False, body=body, message=message, s=s):
            status = channels.post(world, "/v1/play/notifications", body,
                                   {"Authorization": f"Bearer {push_token(world)}", "Content-Type": "application/json"}, cut)
            if status == 200:
                s.setdefault("delivered", set()).add(message)
            return status
        channels.deliver(world, op, send, rng.choice(["once", "twice", "at-once", "late", "cut"]))


# Stripe ------------------------------------------------------------------------------------------

def session_event(serial, sub, account):
    return json.dumps({"id": f"evt_t{serial}s", "object": "event", "type": "checkout.session.completed", "created": int(time.time()),
                       "data": {"object": {"id": f"cs_t{serial}", "object": "checkout.session", "mode": "subscription", "payment_status": "paid",
                                           "client_reference_id": account, "amount_total": 249, "currency": "usd", "subscription": sub,
                                           "invoice": f"in_{sub}_0", "metadata": {"kiosk_product_id": SUBSCRIPTION}}}}, sort_keys=True)


def invoice_event(invoice, sub, account, start, end, reason, failed=False):
    return json.dumps({"id": f"evt_{invoice}{'f' if failed else ''}", "object": "event", "type": "invoice.payment_failed" if failed else "invoice.paid",
                       "created": int(time.time()),
                       "data": {"object": {"id": f"in_{invoice}", "object": "invoice", "billing_reason": reason, "amount_paid": 0 if failed else 249,
                                           "currency": "usd", "next_payment_attempt": end + 86400 if failed else None,
                                           "lines": {"object": "list", "data": [{"period": {"start": start, "end": end}}]},
                                           "parent": {"type": "subscription_details", "subscription_details": {
                                               "subscription": sub, "metadata": {"kiosk_account_id": account, "kiosk_product_id": SUBSCRIPTION}}},
                                           "payments": {"object": "list", "data": [{"payment": {"type": "payment_intent", "payment_intent": f"pi_{invoice}"}}]}}}},
                      sort_keys=True)


def deliver_stripe(world, op, s, key, body):
    """Delivers a Stripe event as channels.py does; a paid invoice is noted as a payment (its grant
    key, and its payment intent for a refund) once the store answered it 200."""
    invoice = json.loads(body)["data"]["object"]

    def send(cut=False):
        status = channels.stripe_delivery(world, body, cut)
        if status == 200 and key == "end":
            s["end_answered"] = True
        elif status == 200 and key:
            s["payments"][key] = True
            if invoice.get("object") == "invoice" and invoice.get("billing_reason") == "subscription_cycle":
                s["paid"][invoice["id"][3:]] = f"pi_{invoice['id'][3:]}"
        return status
    if key and key != "end":
        s["payments"].setdefault(key, None)
    channels.deliver(world, op, send, world.rng.choice(["once", "twice", "at-once", "late", "cut"]))


# Play --------------------------------------------------------------------------------------------

def iso(seconds_since_1970):
    return datetime.datetime.fromtimestamp(seconds_since_1970, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def set_play(world, s, start):
    """What Google answers for the subscription from now on."""
    state = "SUBSCRIPTION_STATE_ACTIVE" if s["autoRenew"] else "SUBSCRIPTION_STATE_CANCELED"
    body = {"subscriptionState": state, "startTime": iso(start or s.setdefault("start", int(time.time()))), "regionCode": "US",
            "lineItems": [{"productId": PLAY_PLAN, "expiryTime": iso(s["expiry"]), "autoRenewingPlan": {"autoRenewEnabled": s["autoRenew"]}}]}
    if start:
        s["start"] = start
    import urllib.request
    request = urllib.request.Request(world.play_api + "/standin/subscriptions/" + s["id"], data=json.dumps(body).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def push_token(world):
    return subprocess.run([str(VENV_PYTHON), str(ROOT / "scripts/play_push_token.py"), "token", str(world.google / "push.pem"), "push-1",
                           AUDIENCE, PUSH_ACCOUNT, "3600"], check=True, capture_output=True, text=True).stdout.strip()


def push_body(world, token, notification_type, message):
    import base64
    data = base64.b64encode(json.dumps({"version": "1.0", "packageName": channels.PLAY_PACKAGE, "eventTimeMillis": str(int(time.time() * 1000)),
                                        "subscriptionNotification": {"version": "1.0", "notificationType": notification_type,
                                                                     "purchaseToken": token}}).encode()).decode()
    return json.dumps({"message": {"data": data, "messageId": message}, "subscription": "projects/torture/subscriptions/rtdn"})


def stores_reference(token):
    import hashlib
    return "play:" + hashlib.sha256(token.encode()).hexdigest()


# The store's row ---------------------------------------------------------------------------------

def linked_row(world, channel, subscription_id):
    rows = stores.channel_subscriptions(world, channel, subscription_id)
    return rows[0] if rows else None


def seconds(value):
    """Seconds since 1970 of a timestamp as stores.py gives it (REAL, ISO text, or a datetime)."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime.datetime):
        instant = value
    else:
        instant = datetime.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00").replace(" ", "T"))
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=datetime.timezone.utc)
    return instant.timestamp()
