import HTTPTypes
import Hummingbird

/// The few HTML pages of web sign-in, from the `signin-message` and `signin-retry` templates: no external resource,
/// ``PagePolicy``'s Content-Security-Policy, never cached.
enum SignInPages {
    /// `signin-message`'s values.
    struct Message {
        var title: String
        var message: String
    }

    /// `signin-retry`'s values: the form to post again, where, and the script that does it.
    struct Retry {
        struct Field {
            var name: String
            var value: String
        }

        var action: String
        var fields: [Field]
        var script: String
    }

    /// Where the 503 page's script is served, beside the callback (the page names it relatively, so it follows the
    /// routes wherever they are mounted).
    static let scriptName = "resubmit.js"

    /// `400`: a callback whose state matches no attempt (there is no return URL to go to).
    static func unknownAttempt() -> Response {
        message(
            .badRequest,
            title: "Sign-in not recognised",
            "This sign-in is unknown or too old. Go back to the app and sign in again."
        )
    }

    /// `400`: a start with an unknown return name, or a callback that is not a form.
    static func badRequest(_ message: String) -> Response {
        self.message(.badRequest, title: "Sign-in refused", message)
    }

    /// `429`: one client posted more sign-ins than one person's browser would; the body was not read.
    static func tooManyRequests(retryAfter: Int) -> Response {
        message(
            .tooManyRequests,
            title: "Too many sign-ins",
            "Too many sign-ins came from your network. Wait a moment, then go back to the app and sign in again.",
            headers: [.retryAfter: "\(retryAfter)"]
        )
    }

    /// `503` at the start: the attempt could not be stored.
    static func unavailable() -> Response {
        message(
            .serviceUnavailable,
            title: "Sign-in unavailable",
            "Sign-in is unavailable for a moment. Please try again shortly.",
            headers: [.retryAfter: "5"]
        )
    }

    /// `503`: the escrow could not take the profile. The same form is posted again by the browser (``scriptName``),
    /// with backoff, for a few minutes, and on the button: until the escrow holds the profile, the browser keeps it.
    /// The post's answer redirects to a return URL: `returnOrigins` (the allow-list's origins) must be in
    /// `form-action`, which browsers also enforce on a form's redirects.
    static func retry(_ form: SignInForm, action: String, returnOrigins: [String]) -> Response {
        let retry = Retry(
            action: action,
            fields: form.fields.map { Retry.Field(name: $0.name, value: $0.value) },
            script: scriptName
        )
        return page(
            .serviceUnavailable,
            { $0.render("signin-retry", retry) },
            returnOrigins: returnOrigins,
            headers: [.retryAfter: "2"]
        )
    }

    /// `GET …/apple/signin/resubmit.js`: the 503 page's script.
    static func script() -> Response {
        page(.ok, \.resubmitScript, type: "text/javascript; charset=utf-8")
    }

    static func message(
        _ status: HTTPResponse.Status,
        title: String,
        _ message: String,
        headers: HTTPFields = [:]
    ) -> Response {
        page(status, { $0.render("signin-message", Message(title: title, message: message)) }, headers: headers)
    }

    /// A page made by `make` from the templates, with sign-in's headers; a `500` naming the missing templates when
    /// they are.
    static func page(
        _ status: HTTPResponse.Status,
        _ make: (PageTemplates) -> String,
        type: String = "text/html; charset=utf-8",
        returnOrigins: [String] = [],
        headers extra: HTTPFields = [:]
    ) -> Response {
        var headers = extra
        headers[.cacheControl] = "no-store"
        headers[.referrerPolicy] = "no-referrer"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[.contentSecurityPolicy] = PagePolicy.contentSecurityPolicy(returnOrigins: returnOrigins)
        return PageTemplates.response(status, headers: headers, type: type, make)
    }
}

extension HTTPField.Name {
    /// `Referrer-Policy`: pages and redirects of the sign-in send no referrer.
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}
