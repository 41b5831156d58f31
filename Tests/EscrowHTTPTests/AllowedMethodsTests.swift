import EscrowTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

/// `405` and its `Allow` header come from the routes as registered, matched as the router matches them.
@Suite("Allowed methods from the router's own routes")
struct AllowedMethodsTests {
    @Test("a literal segment wins over a capture, a capture over a rest wildcard; GET brings HEAD")
    func matching() {
        let router = Router()
        router.get("/a/{id}") { _, _ in "" }
        router.delete("/a/{id}") { _, _ in "" }
        router.post("/a/bulk") { _, _ in "" }
        router.get("/files/**") { _, _ in "" }
        let table = AllowedMethods()
        #expect(table.methods(path: "/a/1") == nil, "nothing before load")
        table.load(router)
        #expect(table.methods(path: "/a/1") == [.delete, .get, .head])
        #expect(table.methods(path: "/a/bulk") == [.post], "the literal route, as the router chooses it")
        #expect(table.methods(path: "/files/x/y/z") == [.get, .head])
        #expect(
            table.methods(path: "/a") == nil && table.methods(path: "/a/1/2") == nil && table.methods(path: "/b") == nil
        )
    }

    @Test("serve's router: 405 with the registered methods, 404 for no route")
    func served() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let requeue = try await client.execute(
                uri: "/v1/admin/escrows/requeue",
                method: .get,
                headers: harness.headers()
            )
            #expect(requeue.status == .methodNotAllowed)
            #expect(requeue.headers[.allow] == "POST")
            let escrow = try await client.execute(uri: "/v1/escrows/abc", method: .put)
            #expect(escrow.headers[.allow] == "DELETE, GET, HEAD")
            let health = try await client.execute(uri: "/healthz", method: .post)
            #expect(health.status == .methodNotAllowed && health.headers[.allow] == "GET, HEAD")
            let console = try await client.execute(uri: "/console/escrows", method: .delete)
            #expect(console.status == .methodNotAllowed, "the console's routes are in the table too")
            #expect(try await client.execute(uri: "/v1/escrows/abc/nothing", method: .get).status == .notFound)
        }
    }
}
