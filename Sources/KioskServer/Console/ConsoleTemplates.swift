import Mustache

/// The console's pages as Mustache templates, in the same library as the shop's and `/account`'s
/// (``PageTemplates/parsed()``): the store has one way to make HTML. Every `{{value}}` is escaped
/// by ``ScalarHTMLContentType``; none uses `{{{…}}}`. The values are ``ConsoleView``'s types.
///
/// A value that may be missing is named with a leading dot (`{{#.link}}`): Mustache otherwise
/// looks a missing name up in the enclosing values, and a cell without a link would take the
/// page's.
enum ConsoleTemplates {
    /// Small, readable at 360 px wide: tables scroll inside their box, forms stack. In the page,
    /// since the console is on an address of its own with nothing else to serve.
    static let style = """
        body{font-family:system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
        header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;background:#1d3557;color:#fff}
        header a{color:#fff;margin-right:.6rem}header a[aria-current]{font-weight:bold;text-decoration:none}
        .logout{margin-left:auto}main{padding:1rem;max-width:70rem}
        .scroll{overflow-x:auto}table{border-collapse:collapse;margin:.5rem 0 1.5rem;min-width:18rem}
        caption{text-align:left;font-weight:bold;padding:.3rem 0}th,td{border-bottom:1px solid #ccc;padding:.25rem .6rem;text-align:left}
        .figures{display:flex;flex-wrap:wrap;gap:1rem;padding:0;list-style:none}.figures li{background:#fff;border:1px solid #ddd;padding:.6rem 1rem}
        .figures b{display:block;font-size:1.4rem}svg{max-width:100%;height:auto;background:#fff;border:1px solid #ddd}
        form.inline{display:inline}label{display:block;margin:.4rem 0 .1rem}input[type=text],input[type=password],input[type=search]{max-width:100%;width:22rem}
        .error{color:#a4161a;font-weight:bold}.done{color:#2b7a0b;font-weight:bold}button{margin:.3rem 0}
        """

    static let layout = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Kiosk console</title>
        <style>\(style)</style>
        </head>
        <body>
        <header><strong>Kiosk</strong> <nav aria-label="Console">{{#navigation}}<a href="{{path}}"{{#current}} aria-current="page"{{/current}}>{{name}}</a> {{/navigation}}</nav> {{#csrf}}<form method="post" action="/logout" class="logout"><input type="hidden" name="csrf" value="{{.}}"><button type="submit">Log out</button></form>{{/csrf}}</header>
        <main>
        <h1>{{title}}</h1>
        {{#done}}<p class="done" role="status">{{.}}</p>{{/done}}
        {{#error}}<p class="error" role="alert">{{.}}</p>{{/error}}
        {{$content}}{{/content}}
        {{#back}}<p><a href="{{href}}">{{label}}</a></p>{{/back}}
        </main>
        </body>
        </html>
        """

    /// A table of text cells (``ConsoleView/Table``); a cell may be code, a link, or carry a note.
    static let table = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<div class="scroll"><table><caption>{{caption}}</caption><thead><tr>{{#headers}}<th scope="col">{{.}}</th>{{/headers}}</tr></thead><tbody>
        {{#rows}}<tr>{{#cells}}<td>{{#.link}}<a href="{{.}}">{{/.link}}{{#.code}}<code>{{/.code}}{{.text}}{{#.code}}</code>{{/.code}}{{#.link}}</a>{{/.link}}</td>{{/cells}}</tr>
        {{/rows}}{{^rows}}<tr><td colspan="{{columns}}">none</td></tr>{{/rows}}
        </tbody></table></div>
        """

    /// A bar chart (``ConsoleView/Chart``): one bar per day, its value in a `<title>` (a tooltip and
    /// what a screen reader reads), the whole described by `role="img"` and its label. The numbers
    /// are also in a table beside it.
    static let chart = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<svg role="img" aria-label="{{title}}: {{description}}" viewBox="0 0 {{width}} {{height}}" width="{{width}}" height="{{height}}"><title>{{title}}</title>{{#bars}}<rect x="{{x}}" y="{{y}}" width="{{width}}" height="{{height}}" fill="#457b9d"><title>{{label}}: {{shown}}</title></rect>{{/bars}}{{#.axis}}<text x="{{left}}" y="{{baseline}}" font-size="12">{{first}}</text><text x="{{right}}" y="{{baseline}}" font-size="12" text-anchor="end">{{last}}</text>{{/.axis}}</svg>
        """

    static let figures = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<ul class="figures">{{#figures}}<li>{{name}}<b>{{value}}</b>{{#.note}}{{.}}{{/.note}}{{#.code}}<code>{{.}}</code>{{/.code}}</li>{{/figures}}</ul>
        """

    /// A page with nothing but the layout's heading, message and way back (errors, refusals).
    static let message = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{/consoleLayout}}
        """

    static let login = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}
        <form method="post" action="/login">
        <label for="token">Admin token</label>
        <input type="password" id="token" name="token" autocomplete="current-password" required>
        <button type="submit">Log in</button>
        </form>
        {{/content}}{{/consoleLayout}}
        """

    static let overview = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <p>Last {{#windows}}<a href="/?days={{days}}"{{#current}} aria-current="true"{{/current}}>{{days}} days</a> {{/windows}}from {{firstDay}} (UTC).
        The same figures: <code>kiosk admin sales --since {{firstDay}} --json</code>.</p>
        {{>consoleFigures}}
        {{#revenue}}<h2>Revenue by day ({{currency}})</h2>
        {{#chart}}{{>consoleChart}}{{/chart}}
        {{/revenue}}
        <h2>Units by day</h2>
        {{#units}}{{>consoleChart}}{{/units}}
        {{#byKind}}{{>consoleTable}}{{/byKind}}
        {{#byDay}}{{>consoleTable}}{{/byDay}}
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let products = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <p>Catalog ETag <code>{{etag}}</code>. Sales as <code>kiosk admin sales --json</code>, content requests as <code>kiosk admin downloads --json</code>.</p>
        <div class="scroll"><table><caption>Products</caption><thead><tr><th scope="col">cover</th><th scope="col">product</th><th scope="col">kind</th><th scope="col">sold</th><th scope="col">refunds</th><th scope="col">net</th><th scope="col">content requests</th><th scope="col">bytes served</th><th scope="col">version</th><th scope="col">size</th></tr></thead><tbody>
        {{#products}}<tr><td><img src="/covers/{{coverPath}}" alt="cover of {{title}}" height="64" loading="lazy"><br><small>{{coverNote}}</small></td>
        <td><code>{{id}}</code><br>{{title}}{{#.details}}<br><small>{{.}}</small>{{/.details}}</td>
        <td>{{kind}}{{#offSale}}<br><strong>off sale</strong>{{/offSale}}</td><td>{{sold}}</td><td>{{refunds}}</td><td>{{net}}</td><td>{{requests}}</td><td>{{served}}</td>
        <td>{{#.version}}<code>{{.}}</code>{{/.version}}</td><td>{{size}}</td></tr>
        {{/products}}{{^products}}<tr><td colspan="10">none</td></tr>{{/products}}
        </tbody></table></div>
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let customers = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <form method="get" action="/customers" role="search">
        <label for="q">Email, account or transaction ID</label>
        <input type="search" id="q" name="q" value="{{query}}" required>
        <button type="submit">Find</button>
        </form>
        {{#.notFound}}<p class="error" role="alert">{{.}}</p>{{/.notFound}}
        {{#.account}}
        <h2>Account <code>{{accountId}}</code></h2>
        <p>{{#.email}}signs in with {{.}}{{/.email}}{{^.email}}anonymous (no sign-in){{/.email}}{{#disabled}} · <strong>disabled</strong>{{/disabled}}{{#deleted}} · deleted by its holder{{/deleted}}</p>
        <ul class="figures"><li>Credits<b>{{credits}}</b></li><li>Transactions<b>{{transactionCount}}</b></li><li>Devices<b>{{deviceCount}}</b></li></ul>
        <div class="scroll"><table><caption>Transactions</caption><thead><tr><th scope="col">transaction</th><th scope="col">date</th><th scope="col">product</th><th scope="col">state</th><th scope="col">amount</th><th scope="col">action</th></tr></thead><tbody>
        {{#transactions}}<tr><td><code>{{id}}</code></td><td>{{date}}</td><td>{{productId}}</td><td>{{state}}{{#.reason}}: {{.}}{{/.reason}}</td><td>{{amount}}</td>
        <td>{{#.refundLabel}}<form method="post" action="/transactions/withdraw"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="transaction" value="{{id}}">
        <label for="reason-{{id}}">Reason</label><input type="text" id="reason-{{id}}" name="reason">
        <label><input type="checkbox" name="confirm" value="yes" required> I mean it</label>
        <button type="submit" name="action" value="refund">{{.}}</button>
        {{#revocable}}<button type="submit" name="action" value="revoke">Revoke</button>{{/revocable}}
        </form>{{/.refundLabel}}</td></tr>
        {{/transactions}}{{^transactions}}<tr><td colspan="6">none</td></tr>{{/transactions}}
        </tbody></table></div>
        <form method="post" action="/accounts/care"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="account" value="{{accountId}}">
        <label for="care-reason">Reason, for the audit list</label><input type="text" id="care-reason" name="reason">
        {{#disabled}}<button type="submit" name="action" value="enable">Enable</button>{{/disabled}}{{^disabled}}<button type="submit" name="action" value="disable">Disable (sign out every device)</button>{{/disabled}}
        {{#.email}}<button type="submit" name="action" value="reset-code">Give a reset code</button>{{/.email}}
        </form>
        {{#devices}}{{>consoleTable}}{{/devices}}
        {{#audit}}{{>consoleTable}}{{/audit}}
        {{/.account}}
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let resetCode = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <p role="status">The one-time code for {{email}}, until {{expires}}:</p>
        <p><code class="code">{{code}}</code></p>
        <p>Give it to the reader by a way you trust; they run <code>kiosk account reset --email {{email}} --code {{code}}</code>. It is not shown again.</p>
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let askToBuy = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <div class="scroll"><table><caption>Waiting for an answer (kiosk admin pending)</caption><thead><tr><th scope="col">transaction</th><th scope="col">asked</th><th scope="col">product</th><th scope="col">account</th><th scope="col">price</th><th scope="col">answer</th></tr></thead><tbody>
        {{#requests}}<tr><td><code>{{id}}</code></td><td>{{asked}}</td><td>{{productId}}</td><td><code>{{accountId}}</code></td><td>{{price}}</td>
        <td><form method="post" action="/ask-to-buy/answer" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="transaction" value="{{id}}">
        <button type="submit" name="answer" value="approve" aria-label="Approve {{id}}">Approve</button>
        <button type="submit" name="answer" value="decline" aria-label="Decline {{id}}">Decline</button></form></td></tr>
        {{/requests}}{{^requests}}<tr><td colspan="6">none</td></tr>{{/requests}}
        </tbody></table></div>
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let notifications = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <p><a href="/notifications">All</a> · <a href="/notifications?failed=true">Failed only</a>. The same rows: <code>kiosk admin notifications{{#failedOnly}} --failed{{/failedOnly}} --json</code>.</p>
        {{#endpoints}}{{>consoleTable}}{{/endpoints}}
        <div class="scroll"><table><caption>Deliveries, newest first</caption><thead><tr><th scope="col">notification</th><th scope="col">type</th><th scope="col">endpoint</th><th scope="col">state</th><th scope="col">attempts</th><th scope="col">last status</th><th scope="col">last error</th><th scope="col">created</th><th scope="col"></th></tr></thead><tbody>
        {{#deliveries}}<tr><td><code>{{id}}</code></td><td>{{type}}</td><td>{{url}}</td><td>{{state}}</td><td>{{attempts}}</td><td>{{lastStatus}}</td><td>{{lastError}}</td><td>{{created}}</td>
        <td>{{#failed}}<form method="post" action="/notifications/resend" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="notification" value="{{id}}">
        <button type="submit" aria-label="Send {{id}} again">Send again</button></form>{{/failed}}</td></tr>
        {{/deliveries}}{{^deliveries}}<tr><td colspan="9">none</td></tr>{{/deliveries}}
        </tbody></table></div>
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    /// Offer codes: each batch with what was redeemed and a way to withdraw it, and a form that
    /// makes codes, shown once on the page that answers it.
    static let codes = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        {{#.made}}<section aria-labelledby="made"><h2 id="made">{{count}} codes made for {{productId}} (batch <code>{{batch}}</code>)</h2><p role="status">Shown this once: the store keeps only their hashes. Copy them now.</p><pre>{{csv}}</pre></section>{{/.made}}
        <div class="scroll"><table><caption>Batches, newest first (kiosk admin codes)</caption><thead><tr><th scope="col">batch</th><th scope="col">product</th><th scope="col">kind</th><th scope="col">gives</th><th scope="col">codes</th><th scope="col">redeemed</th><th scope="col">until</th><th scope="col"></th></tr></thead><tbody>
        {{#batches}}<tr><td><code>{{batch}}</code></td><td>{{productId}}</td><td>{{kind}}</td><td>{{gives}}</td><td>{{codes}}</td><td>{{redeemed}} of {{limit}}</td><td>{{until}}</td>
        <td>{{#open}}<form method="post" action="/codes/revoke" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="batch" value="{{batch}}"><label><input type="checkbox" name="confirm" value="yes"> I mean it</label> <button type="submit" aria-label="Withdraw {{batch}}">Withdraw</button></form>{{/open}}{{^open}}withdrawn{{/open}}</td></tr>
        {{/batches}}{{^batches}}<tr><td colspan="8">none</td></tr>{{/batches}}
        </tbody></table></div>
        <section aria-labelledby="make"><h2 id="make">Make codes</h2>
        <form method="post" action="/codes"><input type="hidden" name="csrf" value="{{csrf}}">
        <p><label for="product">Product</label> <select id="product" name="product">{{#products}}<option value="{{id}}">{{title}} ({{id}})</option>{{/products}}</select></p>
        <p><label for="count">One-time codes</label> <input id="count" name="count" inputmode="numeric" size="6"> <span class="muted">or</span> <label for="code">one code</label> <input id="code" name="code" size="16"> <label for="limit">redeemed by up to</label> <input id="limit" name="limit" inputmode="numeric" size="6"> <span class="muted">accounts</span></p>
        <p><label for="benefit">Each code gives</label> <select id="benefit" name="benefit"><option value="free">the product free (redeemed alone)</option><option value="percentOff">a percentage off (used when buying)</option><option value="amountOff">an amount off (used when buying)</option><option value="introductoryOffer">the subscription's introductory offer (used when buying)</option></select> <label for="value">of</label> <input id="value" name="value" size="6"> <span class="muted">(20 for 20 %, 1.50 for an amount)</span></p>
        <p><label for="expires">Last day (yyyy-mm-dd, optional)</label> <input id="expires" name="expires" size="10"></p>
        <button type="submit">Make codes</button></form></section>
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let payments = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        <p>Events the payment channels sent, each kept once. Those to act on were paid but not granted (refund them on the channel, or grant by hand), or paid for what the account already had.</p>
        {{#.toActOn}}{{>consoleTable}}{{/.toActOn}}{{^.toActOn}}<p role="status">Nothing to act on.</p>{{/.toActOn}}
        {{#byChannel}}{{>consoleTable}}{{/byChannel}}
        {{#tax}}{{>consoleTable}}{{/tax}}
        {{#latest}}{{>consoleTable}}{{/latest}}
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    static let health = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<consoleLayout}}{{$content}}{{#page}}
        {{>consoleFigures}}
        {{#keys}}{{>consoleTable}}{{/keys}}
        {{#metrics}}{{>consoleTable}}{{/metrics}}
        {{/page}}{{/content}}{{/consoleLayout}}
        """

    /// Registers the console's templates in `library`, each name beginning `console`.
    static func register(in library: inout MustacheLibrary) throws {
        try library.register(layout, named: "consoleLayout")
        try library.register(table, named: "consoleTable")
        try library.register(chart, named: "consoleChart")
        try library.register(figures, named: "consoleFigures")
        try library.register(message, named: "consoleMessage")
        try library.register(login, named: "consoleLogin")
        try library.register(overview, named: "consoleOverview")
        try library.register(products, named: "consoleProducts")
        try library.register(customers, named: "consoleCustomers")
        try library.register(resetCode, named: "consoleResetCode")
        try library.register(askToBuy, named: "consoleAskToBuy")
        try library.register(notifications, named: "consoleNotifications")
        try library.register(payments, named: "consolePayments")
        try library.register(codes, named: "consoleCodes")
        try library.register(health, named: "consoleHealth")
    }
}
