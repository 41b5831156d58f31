import EscrowCrypto
import HTTPTypes
import Hummingbird

/// The few HTML pages of web sign-in: self-contained, no external resource, a strict Content-Security-Policy, never
/// cached.
enum SignInPages {
    /// `400`: a callback whose state matches no attempt (there is no return URL to go to).
    static func unknownAttempt() -> Response {
        page(
            .badRequest,
            title: "Sign-in not recognised",
            body: "<p>This sign-in is unknown or too old. Go back to the app and sign in again.</p>",
            scriptNonce: nil
        )
    }

    /// `400`: a start with an unknown return name, or a callback that is not a form.
    static func badRequest(_ message: String) -> Response {
        page(.badRequest, title: "Sign-in refused", body: "<p>\(escape(message))</p>", scriptNonce: nil)
    }

    /// `429`: one client posted more sign-ins than one person's browser would; the body was not read.
    static func tooManyRequests(retryAfter: Int) -> Response {
        page(
            .tooManyRequests,
            title: "Too many sign-ins",
            body: "<p>Too many sign-ins came from your network. Wait a moment, then go back to the app and sign in "
                + "again.</p>",
            scriptNonce: nil,
            extraHeaders: [.retryAfter: "\(retryAfter)"]
        )
    }

    /// `503`: the escrow could not take the profile. The same form is posted again by the browser, with backoff,
    /// for a few minutes, and on the button: until the escrow holds the profile, the browser keeps it. The post's
    /// answer redirects to a return URL: `returnOrigins` (the allow-list's origins) must be in `form-action`, which
    /// browsers also enforce on a form's redirects.
    static func retry(_ form: SignInForm, action: String, returnOrigins: [String]) -> Response {
        let nonce = Base64URL.encode(Hashing.randomBytes(count: 16))
        var inputs = ""
        for field in form.fields {
            inputs += "<input type=\"hidden\" name=\"\(escape(field.name))\" value=\"\(escape(field.value))\">"
        }
        let body = """
            <p>Your sign-in is being saved. This page keeps trying by itself; you can also try now.</p>
            <form id="resubmit" method="post" action="\(escape(action))">\(inputs)
            <button type="submit">Try again</button></form>
            <p id="status" aria-live="polite"></p>
            <script nonce="\(nonce)">\(retryScript)</script>
            """
        return page(
            .serviceUnavailable,
            title: "Saving your sign-in",
            body: body,
            scriptNonce: nonce,
            formAction: returnOrigins,
            extraHeaders: [.retryAfter: "2"]
        )
    }

    /// Re-submits after 2, 4, 8 … seconds (at most 30 between tries), for about six minutes. The count lives in the
    /// tab's session storage under the stamp's time, one count a sign-in (not in a URL fragment, which a redirect
    /// would carry on to the app); the button always works, with or without script.
    static let retryScript = """
        (function () {
          var stamp = document.querySelector("input[name=pe_stamp]");
          var key = "pe-signin-tries-" + (stamp ? stamp.value.split(".")[1] : ""), tries = 0;
          try { tries = parseInt(sessionStorage.getItem(key) || "0", 10) || 0; } catch (e) {}
          if (tries >= 16) {
            document.getElementById("status").textContent = "Saving did not succeed yet: please use the button.";
            return;
          }
          setTimeout(function () {
            try { sessionStorage.setItem(key, String(tries + 1)); } catch (e) {}
            document.getElementById("resubmit").submit();
          }, Math.min(30, Math.pow(2, tries + 1)) * 1000);
        })();
        """

    static func page(
        _ status: HTTPResponse.Status,
        title: String,
        body: String,
        scriptNonce: String?,
        formAction: [String] = [],
        extraHeaders: HTTPFields = [:]
    ) -> Response {
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>\(escape(title))</title></head>
            <body><h1>\(escape(title))</h1>
            \(body)
            </body></html>
            """
        let script = scriptNonce.map { "script-src 'nonce-\($0)'; " } ?? ""
        var headers = extraHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[.referrerPolicy] = "no-referrer"
        let targets = (["'self'"] + formAction).joined(separator: " ")
        headers[.contentSecurityPolicy] =
            "default-src 'none'; \(script)form-action \(targets); frame-ancestors 'none'; base-uri 'none'"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// HTML-escapes text for an element or a double-quoted attribute.
    static func escape(_ text: String) -> String { HTMLEscaping.escape(text) }
}

extension HTTPField.Name {
    /// `Referrer-Policy`: pages and redirects of the sign-in send no referrer.
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}
