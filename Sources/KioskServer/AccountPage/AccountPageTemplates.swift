import Mustache

/// The account page's templates (Mustache). Every `{{value}}` is HTML-escaped by the template
/// engine; none of these uses the unescaped `{{{…}}}` form, so nothing a reader or the catalog
/// wrote can become markup. No script, nothing fetched from elsewhere: the style is in the page.
///
/// Each template begins with the pragma naming Kiosk's content type (``ScalarHTMLContentType``):
/// swift-mustache's own `HTML` escapes a grapheme cluster at a time, which lets a `<` joined to
/// the letter before it through (see ``HTMLForm/escape(_:)``).
enum AccountPageTemplates {
    static let layout = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Kiosk</title>
        <style>
        body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1d2327; background: #f6f7f7; }
        header { background: #1d2327; color: #fff; padding: .6rem 1.2rem; display: flex; gap: 1rem; align-items: center; }
        header form { margin-left: auto; }
        main { max-width: 52rem; margin: 1.5rem auto; padding: 0 1.2rem; }
        section { background: #fff; border: 1px solid #dcdcde; border-radius: 6px; padding: .8rem 1.2rem; margin-bottom: 1.2rem; }
        h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: .2rem; }
        table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #eee; }
        label { display: block; margin-top: .6rem; } input[type=email], input[type=password], input[type=text] { width: 100%; max-width: 24rem; padding: .4rem; font: inherit; }
        button { font: inherit; padding: .3rem .8rem; margin-top: .6rem; cursor: pointer; }
        .inline { display: inline; } .inline button { margin-top: 0; }
        .error { color: #8a1f11; background: #fcf0f1; border: 1px solid #d63638; padding: .5rem .8rem; border-radius: 4px; }
        .notice { color: #00450c; background: #edfaef; border: 1px solid #00a32a; padding: .5rem .8rem; border-radius: 4px; }
        .muted { color: #646970; } .danger button { color: #8a1f11; }
        </style>
        </head>
        <body>
        <header><strong>Kiosk</strong> <span>Your account</span>
        {{#signedIn}}<form method="post" action="/account/sign-out"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Sign out</button></form>{{/signedIn}}
        </header>
        <main>
        <h1>{{title}}</h1>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{$content}}{{/content}}
        </main>
        </body>
        </html>
        """

    static let signIn = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        <form method="post" action="/account/sign-in">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="next" value="{{next}}">
        <input type="hidden" name="code" value="{{code}}">
        <label for="email">Email</label>
        <input type="email" id="email" name="email" value="{{email}}" autocomplete="username" required>
        <label for="password">Password</label>
        <input type="password" id="password" name="password" autocomplete="current-password" required>
        <button type="submit">Sign in</button>
        </form>
        <p class="muted">No sign-in yet? On a device with Kiosk: <code>kiosk account create --email YOU@EXAMPLE.COM</code>. Locked out? Ask the store for a reset code.</p>
        </section>
        {{/content}}{{/layout}}
        """

    static let account = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        <h2>Account</h2>
        <p>{{email}} · <span class="muted">{{accountId}}</span> · {{credits}} credits</p>
        </section>
        <section>
        <h2>Purchases</h2>
        {{^owned}}<p class="muted">Nothing bought yet.</p>{{/owned}}
        {{#hasOwned}}<ul>{{#owned}}<li>{{.}}</li>{{/owned}}</ul>{{/hasOwned}}
        </section>
        <section>
        <h2>Subscriptions</h2>
        {{^subscriptions}}<p class="muted">No subscriptions.</p>{{/subscriptions}}
        {{#hasSubscriptions}}<table><tr><th>Product</th><th>State</th><th>Until</th><th>Renews</th></tr>
        {{#subscriptions}}<tr><td>{{productId}}</td><td>{{state}}</td><td>{{expires}}</td><td>{{#autoRenew}}yes
        <form method="post" action="/account/subscriptions/cancel" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="subscription" value="{{id}}"><button type="submit">Cancel auto-renew</button></form>{{/autoRenew}}{{^autoRenew}}no{{/autoRenew}}</td></tr>{{/subscriptions}}
        </table>{{/hasSubscriptions}}
        </section>
        <section>
        <h2>Devices</h2>
        <p class="muted">{{deviceCount}} of at most {{deviceLimit}}.</p>
        <table><tr><th>Name</th><th>Signed in</th><th>Last seen</th><th></th></tr>
        {{#devices}}<tr><td>{{name}}{{#current}} <strong>(this browser)</strong>{{/current}}</td><td>{{created}}</td><td>{{lastSeen}}</td>
        <td>{{^current}}<form method="post" action="/account/devices/remove" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="device" value="{{id}}"><button type="submit" aria-label="Remove {{name}}">Remove</button></form>{{/current}}</td></tr>{{/devices}}
        </table>
        <form method="post" action="/account/sign-out-everywhere"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Sign out everywhere</button></form>
        </section>
        <section>
        <h2>Sign in a device with a code</h2>
        <form method="post" action="/account/device">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="code">The code the device shows</label>
        <input type="text" id="code" name="code" value="{{code}}" autocomplete="off" required>
        <button type="submit">Approve</button>
        </form>
        </section>
        <section>
        <h2>Your data</h2>
        <p><a href="/account/export" download="kiosk-account.json">Download everything the store holds about you</a> (one JSON file).</p>
        <form method="post" action="/account/delete" class="danger">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="delete-password">Delete the account: your password</label>
        <input type="password" id="delete-password" name="password" autocomplete="current-password" required>
        <label><input type="checkbox" name="confirm" value="yes" required> I understand: my sign-in and devices are erased; the store keeps its records of payments, under the account's number alone.</label>
        <button type="submit">Delete my account</button>
        </form>
        </section>
        {{/content}}{{/layout}}
        """

    static let deleted = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        <p>Account {{accountId}} is deleted. Erased:</p>
        <ul>{{#erased}}<li>{{.}}</li>{{/erased}}</ul>
        <p>Kept:</p>
        <ul>{{#kept}}<li>{{.}}</li>{{/kept}}</ul>
        </section>
        {{/content}}{{/layout}}
        """

    static let message = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}<p><a href="/account">Back to your account</a></p>{{/content}}{{/layout}}
        """

    /// The templates, parsed once.
    static func library() throws -> MustacheLibrary {
        MustacheContentTypes.register(ScalarHTMLContentType(), named: ScalarHTMLContentType.name)
        var library = MustacheLibrary()
        try library.register(layout, named: "layout")
        try library.register(signIn, named: "signIn")
        try library.register(account, named: "account")
        try library.register(deleted, named: "deleted")
        try library.register(message, named: "message")
        return library
    }
}
