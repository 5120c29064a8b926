import Mustache

/// The account page's templates (Mustache), in the pages' one layout (``PageTemplates``): every
/// `{{value}}` is HTML-escaped, as there.
enum AccountPageTemplates {
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
        {{#sendsMail}}<p><a href="/account/forgot">Forgot your password?</a></p>{{/sendsMail}}{{^sendsMail}}<p class="muted">Locked out? Ask the store for a reset code.</p>{{/sendsMail}}
        </section>
        <section>
        <h2>New here?</h2>
        <form method="post" action="/account/sign-up">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="next" value="{{next}}">
        <label for="new-email">Your email, to sign in with</label>
        <input type="email" id="new-email" name="email" autocomplete="email" required>
        <label for="new-password">A password of at least 8 characters</label>
        <input type="password" id="new-password" name="password" autocomplete="new-password" minlength="8" required>
        <button type="submit">Create an account</button>
        </form>
        <p class="muted">On a device with Kiosk: <code>kiosk account create --email YOU@EXAMPLE.COM</code> does the same.</p>
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
        {{#hasSubscriptions}}<table><tr><th>Product</th><th>State</th><th>Until</th><th>Renews</th><th>Plan</th></tr>
        {{#subscriptions}}<tr><td>{{productId}}</td><td>{{state}}</td><td>{{expires}}</td><td>{{#autoRenew}}yes{{#renewsAs}}, as {{.}}{{/renewsAs}}
        <form method="post" action="/account/subscriptions/cancel" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="subscription" value="{{id}}"><button type="submit">Cancel auto-renew</button></form>{{/autoRenew}}{{^autoRenew}}no{{/autoRenew}}</td>
        <td>{{#hasPlans}}<form method="post" action="/account/subscriptions/change" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="key" value="{{formKey}}-{{id}}"><input type="hidden" name="subscription" value="{{id}}"><label for="plan-{{id}}">Move to</label> <select id="plan-{{id}}" name="plan">{{#plans}}<option value="{{id}}">{{label}}</option>{{/plans}}</select> <button type="submit">Change plan</button></form>{{/hasPlans}}</td></tr>{{/subscriptions}}
        </table>
        <p class="muted">An upgrade starts at once and credits the unused part of the running period; a downgrade starts at the next renewal. Choosing the plan you have undoes a change that waits.</p>{{/hasSubscriptions}}
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
        <h2>Reading progress on every device</h2>
        <p>KOReader keeps your place in each book here: in its menu, <em>Progress sync</em>, <em>Custom sync server</em> {{syncServer}}, then <em>Log in</em> with your email and a sync password.</p>
        {{#syncPassword}}<p role="status">Your sync password, shown this once: <code>{{.}}</code></p>{{/syncPassword}}
        <form method="post" action="/account/sync-password"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="key" value="{{formKey}}"><button type="submit">Make a sync password</button></form>
        <p class="muted">Each one is listed under Devices, where removing it signs its reading apps out.</p>
        </section>
        <section>
        <h2>Your country</h2>
        <p>Storefront: {{storefrontName}}. It decides the prices, the currency and the tax of what you buy.</p>
        <form method="post" action="/account/storefront"><input type="hidden" name="csrf" value="{{csrf}}"><label for="storefront">Country</label> <select id="storefront" name="storefront">{{#storefronts}}<option value="{{code}}"{{#selected}} selected{{/selected}}>{{name}}</option>{{/storefronts}}</select> <button type="submit">Choose</button></form>
        </section>
        <section>
        <h2>Redeem a code</h2>
        <form method="post" action="/account/redeem-code"><input type="hidden" name="csrf" value="{{csrf}}"><label for="offer-code">Offer code</label> <input id="offer-code" name="offerCode" autocomplete="off" spellcheck="false" maxlength="64" required> <button type="submit">Redeem</button></form>
        <p class="muted">A code a publisher gave you: what it gives is in your library at once.</p>
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
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}<p>{{#shop}}<a href="/">Back to the shop</a>{{/shop}}{{^shop}}<a href="/account">Back to your account</a>{{/shop}}</p>{{/content}}{{/layout}}
        """

    /// Asking for a reset link by email.
    static let forgot = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        {{^sent}}<form method="post" action="/account/forgot">
        <label for="email">The email you sign in with</label>
        <input type="email" id="email" name="email" autocomplete="username" required>
        <button type="submit">Mail me a reset link</button>
        </form>{{/sent}}
        <p><a href="/account">Back to signing in</a></p>
        </section>
        {{/content}}{{/layout}}
        """

    /// Setting a new password with the code a reset link carried.
    static let reset = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        <form method="post" action="/account/reset">
        <label for="email">The email you sign in with</label>
        <input type="email" id="email" name="email" value="{{email}}" autocomplete="username" required>
        <label for="code">Your reset code</label>
        <input type="text" id="code" name="code" value="{{code}}" autocomplete="one-time-code" required>
        <label for="password">A new password of at least 8 characters</label>
        <input type="password" id="password" name="password" autocomplete="new-password" minlength="8" required>
        <button type="submit">Set the new password</button>
        </form>
        <p class="muted">Every device signed in to the account is signed out.</p>
        </section>
        {{/content}}{{/layout}}
        """

    /// Confirming an address: a button, so a mail scanner that opens the link confirms nothing.
    static let confirm = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        {{^confirmed}}<form method="post" action="/account/confirm">
        <input type="hidden" name="token" value="{{token}}">
        <button type="submit">Confirm my address</button>
        </form>{{/confirmed}}
        <p><a href="/account">Your account</a></p>
        </section>
        {{/content}}{{/layout}}
        """

    /// Registers the account page's templates in `library` (``PageTemplates.parsed()``).
    static func register(in library: inout MustacheLibrary) throws {
        try library.register(forgot, named: "forgot")
        try library.register(reset, named: "reset")
        try library.register(confirm, named: "confirm")
        try library.register(signIn, named: "signIn")
        try library.register(account, named: "account")
        try library.register(deleted, named: "deleted")
        try library.register(message, named: "message")
    }
}
