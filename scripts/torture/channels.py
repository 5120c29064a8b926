"""The real channels in the history (issue 45): the web shop's payment service sending its signed
events (Stripe's scheme: HMAC-SHA256 of `t.body`) and Google Play purchases presented by a device's
account (signed by `openssl dgst -sha1 -sign`, as Play signs them). Each is delivered as a channel
delivers: once, twice, twice at once, late (after other operations, while the server may be
killed), cut off (the connection closed before the answer, then sent again as the channel retries),
and a Play token presented by two accounts at once. A web payment is sometimes refunded or disputed,
before or after its checkout event. The store grants each payment once, to one account; the
devices take the grants in as purchases made elsewhere (their agent, restore), and the checker's
rules hold as for every purchase (checks/channel_once.py adds one of its own)."""
import base64, hashlib, hmac, json, socket, subprocess, threading, time, urllib.error, urllib.parse, urllib.request

from .common import BOOKS, ISSUES, LARGE, PACKS

STRIPE_SECRET = "whsec_torture_secret"
PLAY_PACKAGE = "com.example.torture"
# Each catalog product the channels sell, by its Play ID.
PLAY_PREFIX = "play."
# How long a channel keeps sending an event nobody answered 2xx (Stripe: days; here: the history).
RETRY_SECONDS = 120


def prepare_store(world):
    """Play IDs in the run's catalog and the app's key pair, made by openssl."""
    for file in (world.store / "Catalog").glob("*.json"):
        document = json.loads(file.read_text())
        for product in document["products"]:
            if product["id"] in BOOKS + ISSUES + LARGE or product["id"] in PACKS:
                product["playProductId"] = PLAY_PREFIX + product["id"]
        file.write_text(json.dumps(document, indent=2))
    keys = world.work / "play"
    keys.mkdir()
    subprocess.run(["openssl", "genrsa", "-out", str(keys / "play.pem"), "2048"], check=True, capture_output=True)
    der = subprocess.run(["openssl", "rsa", "-in", str(keys / "play.pem"), "-pubout", "-outform", "DER"], check=True, capture_output=True).stdout
    (keys / "play.key").write_text(base64.b64encode(der).decode())
    world.play_keys = keys


def server_flags(world):
    return ["--stripe-webhook-secret", STRIPE_SECRET, "--play-package-name", PLAY_PACKAGE,
            "--play-public-key", str(world.play_keys / "play.key")]


def channel_op(world):
    rng = world.rng
    home = rng.choice(["a", "b", "c"])
    account, token = world.account_of(home)
    channel = rng.choices(["web", "play"], weights=[1, 1])[0]
    delivery = rng.choices(["once", "twice", "at-once", "late", "cut"] + (["two-accounts"] if channel == "play" else []),
                           weights=[3, 2, 2, 2, 2] + ([2] if channel == "play" else []))[0]
    product = rng.choice(BOOKS + ISSUES + LARGE + sorted(PACKS))
    op = {"index": len(world.ops), "kind": f"{channel}-buy", "home": home, "argv": [product, delivery], "start": time.time(), "end": None, "exit": None}
    world.ops.append(op)
    if account is None:
        op["exit"], op["end"] = "no account", time.time()
        return
    serial = f"{world.args.seed}-{op['index']}"
    if channel == "web":
        quantity = rng.randint(1, 3) if product in PACKS else 1
        body = checkout_event(serial, account, product, quantity, world.catalog[product])
        send = lambda cut=False: stripe_delivery(world, body, cut)
        # Packs are not refunded here, as the operator's refunds leave them out: their credits may be spent.
        withdrawal = product not in PACKS and rng.random() < 0.15
        if withdrawal and rng.random() < 0.5:
            # Refunded (or disputed) before the checkout event arrives.
            op["withdrawn"] = "first"
            kind = rng.choice(["charge.refunded", "charge.dispute.created"])
            deliver(world, op, withdrawal_sender(world, lambda cut=False: stripe_delivery(world, refund_event(serial, kind), cut)), "once")
    else:
        json_text = play_purchase(serial, product, quantity=rng.randint(1, 3) if product in PACKS else 1)
        signature = play_sign(world, json_text)
        send = lambda cut=False: play_delivery(world, token, json_text, signature, cut)
        withdrawal = False
        if delivery == "two-accounts":
            other = rng.choice([h for h in ("a", "b", "c") if world.account_of(h)[0] not in (None, account)] or [home])
            other_token = world.account_of(other)[1]
            op["argv"].append(f"also {other}")
            results = {}
            barrier = threading.Barrier(2)

            def present(name, tok):
                barrier.wait()
                results[name] = play_delivery(world, tok, json_text, signature)

            threads = [threading.Thread(target=present, args=(home, token)), threading.Thread(target=present, args=(other, other_token))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            op["exit"], op["end"] = ", ".join(f"{name} {results.get(name)}" for name in (home, other)), time.time()
            return
    deliver(world, op, send, delivery)
    if channel == "web" and withdrawal and op.get("withdrawn") != "first":
        op["withdrawn"] = "after"
        deliver(world, {"index": op["index"]}, withdrawal_sender(world, lambda cut=False: stripe_delivery(world, refund_event(serial, "charge.refunded"), cut)), "once")


def withdrawal_sender(world, send):
    """`send` for a refund or a dispute, noting when the store took it: a revocation that may end a
    transfer and drop its bytes, as an operator's refund does (checks/restarted.py, refetched.py)."""
    def sending(cut=False):
        status = send(cut)
        if status == 200:
            world.channel_withdrawals.append(time.time())
        return status
    return sending


def deliver(world, op, send, delivery):
    """Sends as `delivery` says, and keeps sending (in the background) until the store answers 2xx
    or the retry time passes: what a channel does with an event or an app with a purchase."""
    if delivery == "twice":
        results = [send(), send()]
        if 200 not in results:
            background(world, send)
        op["exit"] = f"{results[0]}, then {results[1]}"
    elif delivery == "at-once":
        results = []
        threads = [threading.Thread(target=lambda: results.append(send())) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        if not any(status == 200 for status in results):
            background(world, send)
        op["exit"] = " and ".join(str(status) for status in results)
    elif delivery == "late":
        background(world, send, delay=world.rng.uniform(1, 8))
        op["exit"] = "sent later"
    elif delivery == "cut":
        send(cut=True)
        background(world, send, delay=world.rng.uniform(0.5, 4))
        op["exit"] = "cut off, sent again later"
    else:
        status = send()
        if status != 200:
            background(world, send)
        op["exit"] = status
    op["end"] = time.time()


def background(world, send, delay=0.0):
    def run():
        time.sleep(delay)
        deadline = time.time() + RETRY_SECONDS
        while time.time() < deadline:
            status = send()
            # A 4xx is the store's final answer (Play's purchase refused as another account's).
            if isinstance(status, int) and status < 500:
                return
            time.sleep(1)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    world.channel_threads.append(thread)


def settle(world):
    """Waits for the deliveries still in the background (before quiescence)."""
    for thread in world.channel_threads:
        thread.join(RETRY_SECONDS + 30)


# The web shop: Stripe's events ------------------------------------------------------------------

def checkout_event(serial, account, product, quantity, catalog_entry):
    amount = int(round(float(catalog_entry["price"]) * 100)) * quantity
    return json.dumps({"id": f"evt_t{serial}", "object": "event", "type": "checkout.session.completed", "created": int(time.time()),
                       "data": {"object": {"id": f"cs_t{serial}", "object": "checkout.session", "payment_status": "paid",
                                           "client_reference_id": account, "amount_total": amount,
                                           "currency": catalog_entry.get("currency", "USD").lower(), "payment_intent": f"pi_t{serial}",
                                           "metadata": {"kiosk_product_id": product, "kiosk_quantity": str(quantity)}}}}, sort_keys=True)


def refund_event(serial, kind):
    suffix = "r" if kind == "charge.refunded" else "d"
    obj = ({"id": f"ch_t{serial}", "object": "charge", "payment_intent": f"pi_t{serial}", "amount": 1, "amount_refunded": 1, "refunded": True}
           if kind == "charge.refunded" else {"id": f"dp_t{serial}", "object": "dispute", "payment_intent": f"pi_t{serial}", "amount": 1})
    return json.dumps({"id": f"evt_t{serial}{suffix}", "object": "event", "type": kind, "data": {"object": obj}}, sort_keys=True)


def stripe_delivery(world, body, cut=False):
    timestamp = int(time.time())
    signature = hmac.new(STRIPE_SECRET.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    headers = {"Stripe-Signature": f"t={timestamp},v1={signature}", "Content-Type": "application/json"}
    return post(world, "/v1/stripe/webhook", body, headers, cut)


# Google Play ------------------------------------------------------------------------------------

def play_purchase(serial, product, quantity):
    return (f'{{"orderId":"GPA.{serial}","packageName":"{PLAY_PACKAGE}","productId":"{PLAY_PREFIX}{product}",'
            f'"purchaseTime":{int(time.time() * 1000)},"purchaseState":0,"purchaseToken":"tok-{serial}.AO-J1O",'
            f'"quantity":{quantity},"acknowledged":false}}')


def play_sign(world, text):
    signed = subprocess.run(["openssl", "dgst", "-sha1", "-sign", str(world.play_keys / "play.pem")], input=text.encode(),
                            check=True, capture_output=True).stdout
    return base64.b64encode(signed).decode()


def play_delivery(world, token, text, signature, cut=False):
    body = json.dumps({"purchase": text, "signature": signature})
    return post(world, "/v1/play/purchases", body, {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}, cut)


# The wire ---------------------------------------------------------------------------------------

def post(world, path, body, headers, cut=False):
    """POSTs to the store itself (the channels do not go through the devices' fault proxy); with
    `cut`, the connection is closed as soon as the request is sent, before any answer."""
    url = world.server.url
    if not url:
        return "no server"
    if not cut:
        status, _ = raw(url, path, body, headers)
        return status
    parsed = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=5) as connection:
            connection.sendall(request_bytes(parsed, path, body, headers))
    except OSError as error:
        return f"no answer ({error})"
    return "cut"


def raw(url, path, body, headers):
    request = urllib.request.Request(url + path, method="POST", data=body.encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return answer.status, None
    except urllib.error.HTTPError as error:
        return error.code, None
    except (urllib.error.URLError, OSError) as error:
        return f"no answer ({error})", None


def request_bytes(parsed, path, body, headers):
    data = body.encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {parsed.hostname}:{parsed.port}", f"Content-Length: {len(data)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data
