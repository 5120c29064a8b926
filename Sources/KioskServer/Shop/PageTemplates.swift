import Mustache

/// The pages on the store's address (the shop, the reader's library, `/account`), as Mustache
/// templates in one layout; the console's (``ConsoleTemplates``) join them in one library, so the
/// store has one way to make HTML. Every `{{value}}` is HTML-escaped by the template engine; none
/// uses the unescaped `{{{…}}}` form, so nothing a reader or the catalog wrote can become markup.
/// No script, nothing fetched from elsewhere; the style is the store's own `/kiosk.css`.
///
/// Each template begins with the pragma naming Kiosk's content type (``ScalarHTMLContentType``):
/// swift-mustache's own `HTML` escapes a grapheme cluster at a time, which lets a `<` joined to
/// the letter before it through (see ``HTMLForm/escape(_:)``).
enum PageTemplates {
    static let layout = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Kiosk</title>
        <link rel="stylesheet" href="/kiosk.css?v={{styleVersion}}">
        </head>
        <body>
        <header>
        <nav aria-label="Store"><a href="/" class="brand">Kiosk</a> <a href="/account/library">Your library</a> <a href="/account">Your account</a></nav>
        <form method="get" action="/search" role="search"><label for="search" class="visually-hidden">Search the store</label><input type="search" id="search" name="q" value="{{query}}" placeholder="Title, author, subject"><button type="submit">Search</button></form>
        {{#signedIn}}<form method="post" action="/account/sign-out" class="account"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Sign out</button></form>{{/signedIn}}
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

    /// Products as a grid of covers: each a link to its page, its contributors and price.
    static let shelf = """
        {{% CONTENT_TYPE: KIOSK_HTML}}<ul class="shelf">{{#items}}<li><a href="{{href}}"><img src="{{cover}}" alt="" width="144" height="216" loading="lazy">{{title}}</a>{{#byline}}<span class="muted">{{byline}}</span>{{/byline}}<span>{{price}}</span></li>{{/items}}</ul>
        """

    static let front = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        {{#books.hasItems}}<section aria-labelledby="new-books"><h2 id="new-books">New books</h2>{{#books}}{{>shelf}}{{/books}}{{#books.more}}<p><a href="/books">All books</a></p>{{/books.more}}</section>{{/books.hasItems}}
        {{#issues.hasItems}}<section aria-labelledby="new-issues"><h2 id="new-issues">New issues</h2>{{#issues}}{{>shelf}}{{/issues}}</section>{{/issues.hasItems}}
        {{#hasMagazines}}<section aria-labelledby="magazines"><h2 id="magazines">Magazines</h2><ul>{{#magazines}}<li><a href="{{href}}">{{name}}</a>{{#plans}} <span class="muted">· subscribe from {{from}}</span>{{/plans}}</li>{{/magazines}}</ul></section>{{/hasMagazines}}
        {{#hasSubjects}}<section aria-labelledby="subjects"><h2 id="subjects">Subjects</h2><ul>{{#subjects}}<li><a href="{{href}}">{{name}}</a></li>{{/subjects}}</ul></section>{{/hasSubjects}}
        {{^books.hasItems}}{{^issues.hasItems}}<section><p>Nothing is on sale yet.</p></section>{{/issues.hasItems}}{{/books.hasItems}}
        {{/content}}{{/layout}}
        """

    /// A list of products (all books, a series, a subject, a search's results), paged.
    static let list = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        {{#intro}}<p>{{intro}}</p>{{/intro}}
        {{#hasPlans}}<section aria-labelledby="plans"><h2 id="plans">Subscribe</h2>{{#plans}}{{>shelf}}{{/plans}}</section>{{/hasPlans}}
        <section aria-label="{{title}}">
        {{#page.hasItems}}{{#page}}{{>shelf}}{{/page}}{{/page.hasItems}}
        {{^page.hasItems}}<p>{{empty}}</p>{{/page.hasItems}}
        {{#page.paged}}<nav class="pages" aria-label="Pages">{{#page.previous}}<a href="{{page.previous}}" rel="prev">Previous</a>{{/page.previous}}<span>Page {{page.number}} of {{page.count}}</span>{{#page.next}}<a href="{{page.next}}" rel="next">Next</a>{{/page.next}}</nav>{{/page.paged}}
        </section>
        {{/content}}{{/layout}}
        """

    static let product = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section class="product">
        <img src="{{cover}}" alt="Cover of {{name}}" width="256" height="384">
        <div>
        {{#byline}}<p>{{byline}}</p>{{/byline}}
        {{#series}}<p>{{kindLabel}} of <a href="{{series.href}}">{{series.name}}</a></p>{{/series}}
        <p>{{description}}</p>
        <p class="price">{{price}}{{#period}} <span class="muted">a {{period}}</span>{{/period}}</p>
        {{#offer}}<p class="offer">{{offer}}</p>{{/offer}}
        <p><a class="button" href="{{buy}}">{{buyLabel}}<span class="visually-hidden"> {{name}}</span></a></p>
        </div>
        </section>
        {{#hasDetails}}<section aria-labelledby="details"><h2 id="details">Details</h2><table>{{#details}}<tr><th scope="row">{{name}}</th><td>{{value}}</td></tr>{{/details}}</table></section>{{/hasDetails}}
        {{#issues.hasItems}}<section aria-labelledby="issues"><h2 id="issues">Issues</h2>{{#issues}}{{>shelf}}{{/issues}}</section>{{/issues.hasItems}}
        {{#plans.hasItems}}<section aria-labelledby="plans"><h2 id="plans">Subscribe</h2>{{#plans}}{{>shelf}}{{/plans}}</section>{{/plans.hasItems}}
        {{/content}}{{/layout}}
        """

    /// The reader's library: what the account owns, a download link for each file, and each
    /// subscription's state.
    static let readerLibrary = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        {{^hasItems}}<section><p>Nothing here yet. <a href="/">Find something to read</a>.</p></section>{{/hasItems}}
        {{#hasItems}}<section aria-labelledby="owned"><h2 id="owned">Yours to read</h2><table>
        <tr><th scope="col">Title</th><th scope="col">File</th><th scope="col"><span class="visually-hidden">Download</span></th></tr>
        {{#items}}<tr><td><a href="{{href}}">{{title}}</a>{{#covered}} <span class="muted">(with {{covered}})</span>{{/covered}}{{#place}} <span class="muted">· continue at {{.}}</span>{{/place}}</td><td>{{format}}, {{size}}</td>
        <td>{{#download}}<a href="{{download}}" download>Download<span class="visually-hidden"> {{title}}</span></a>{{/download}}{{^download}}<span class="muted">{{note}}</span>{{/download}}</td></tr>{{/items}}
        </table><p class="muted">In a reading app: <a href="{{appLink}}">open your shelf</a>, or add {{shelf}} as a catalog.</p></section>{{/hasItems}}
        {{#hasSubscriptions}}<section aria-labelledby="subscriptions"><h2 id="subscriptions">Subscriptions</h2><table>
        <tr><th scope="col">Plan</th><th scope="col">State</th><th scope="col">Until</th><th scope="col">Renews</th></tr>
        {{#subscriptions}}<tr><td>{{title}}</td><td>{{state}}</td><td>{{expires}}</td><td>{{#autoRenew}}yes{{/autoRenew}}{{^autoRenew}}no{{/autoRenew}}</td></tr>{{/subscriptions}}
        </table><p class="muted">Turn renewal off on <a href="/account">your account</a>.</p></section>{{/hasSubscriptions}}
        {{#hasWaiting}}<section aria-labelledby="waiting"><h2 id="waiting">Waiting for the payment</h2><ul>{{#waiting}}<li>{{.}}</li>{{/waiting}}</ul><p class="muted">Reload this page once you have paid: a purchase shows here the moment the payment lands.</p></section>{{/hasWaiting}}
        {{/content}}{{/layout}}
        """

    /// Buying one product: a confirmation with the form that starts the payment.
    static let buy = """
        {{% CONTENT_TYPE: KIOSK_HTML}}{{<layout}}{{$content}}
        <section>
        <p><a href="{{href}}">{{name}}</a>: <span class="price">{{price}}</span>{{#period}} a {{period}}{{/period}}</p>
        {{#offer}}<p class="offer">{{offer}}</p>{{/offer}}
        {{#storefrontNote}}<p class="muted">{{.}}</p>{{/storefrontNote}}
        {{#owned}}<p><a href="/account/library">Open your library</a></p>{{/owned}}
        {{^owned}}<form method="post" action="{{action}}"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="key" value="{{key}}"><p><label for="buy-code">Offer code (optional)</label> <input id="buy-code" name="offerCode" autocomplete="off" spellcheck="false" maxlength="64"></p><button type="submit">{{payLabel}}</button></form>
        {{#sandbox}}<p class="muted">This store runs in the sandbox: the payment is pretend, and the purchase is in your library at once.</p>{{/sandbox}}
        {{^sandbox}}<p class="muted">You pay on the store's payment page; the purchase is in your library once the payment lands.</p>{{/sandbox}}{{/owned}}
        </section>
        {{/content}}{{/layout}}
        """

    /// Every page's templates, parsed once.
    static func parsed() throws -> MustacheLibrary {
        MustacheContentTypes.register(ScalarHTMLContentType(), named: ScalarHTMLContentType.name)
        var templates = MustacheLibrary()
        try templates.register(layout, named: "layout")
        try templates.register(shelf, named: "shelf")
        try templates.register(front, named: "front")
        try templates.register(list, named: "list")
        try templates.register(product, named: "product")
        try templates.register(readerLibrary, named: "library")
        try templates.register(buy, named: "buy")
        try AccountPageTemplates.register(in: &templates)
        try ConsoleTemplates.register(in: &templates)
        return templates
    }
}
