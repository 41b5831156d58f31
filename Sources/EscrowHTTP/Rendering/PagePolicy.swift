/// The Content-Security-Policy of every page the service renders, written once. Styles only from the stylesheet,
/// scripts only from the service's own files (the 503 sign-in page's `resubmit.js`), images only from itself (the
/// charts are inline SVG elements, not images), forms only to itself; never framed. No template carries a `style`
/// attribute, a `<style>` element or an inline script, so no unsafe source, hash or nonce is needed.
enum PagePolicy {
    /// The console's and the purge report's policy.
    static let contentSecurityPolicy = policy(formTargets: ["'self'"])

    /// Web sign-in's pages: the 503 page's form posts to the callback, whose answer redirects to the app's return URL,
    /// and browsers apply `form-action` to that redirect too, so the return URLs' `origins` are allowed.
    static func contentSecurityPolicy(returnOrigins origins: [String]) -> String {
        policy(formTargets: ["'self'"] + origins)
    }

    private static func policy(formTargets: [String]) -> String {
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            + "form-action \(formTargets.joined(separator: " ")); frame-ancestors 'none'; base-uri 'none'"
    }
}
