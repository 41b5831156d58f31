import ArgumentParser
import Testing

@testable import profile_escrow

/// `--signin-return`: the URLs a sign-in may end at, apps' included, each taken exactly; never a scheme a browser acts
/// on itself.
@Suite("Sign-in return URLs")
struct SignInReturnURLTests {
    @Test(
        "a page, an App Link, an app's own scheme and an Android intent:// URL are accepted",
        arguments: [
            "https://app.example.invalid/signed-in", "http://localhost:3000/signed-in",
            "intent://callback#Intent;package=invalid.example.app;scheme=signinwithapple;end",
            "invalid.example.app:/signed-in", "exampleapp://callback",
        ]
    )
    func accepted(_ url: String) throws {
        try SignInOptions.requireReturnURL(url, "--signin-return app")
    }

    @Test(
        "browser schemes, plain http elsewhere, a fragment on an app's scheme and a broken intent:// are refused",
        arguments: [
            "javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "http://app.example.invalid/",
            "exampleapp://callback#fragment", "intent://callback", "intent://callback#Intent;package=x",
            "/relative/path",
        ]
    )
    func refused(_ url: String) {
        #expect(throws: ValidationError.self) { try SignInOptions.requireReturnURL(url, "--signin-return app") }
    }
}
