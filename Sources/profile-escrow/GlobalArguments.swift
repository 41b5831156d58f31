/// Global options are accepted before the subcommand too: `profile-escrow --database X status …`.
///
/// argument-parser reads an `@OptionGroup` only after the subcommand that declares it, so the options written
/// before the first subcommand name are moved to the end of the arguments (before a `--`), where every
/// subcommand's ``GlobalOptions`` reads them.
enum GlobalArguments {
    /// Global options that take a value.
    static let valued: Set<String> = ["--database", "--keyring", "--retention", "--log-level", "--log-format"]
    /// Global flags.
    static let flags: Set<String> = ["-v", "--verbose"]

    static func movedAfterSubcommand(_ arguments: [String]) -> [String] {
        var moved: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if flags.contains(argument) {
                moved.append(argument)
                index += 1
            } else if valued.contains(name), argument.contains("=") {
                moved.append(argument)
                index += 1
            } else if valued.contains(argument), index + 1 < arguments.count {
                moved += [argument, arguments[index + 1]]
                index += 2
            } else {
                break
            }
        }
        guard !moved.isEmpty, index < arguments.count else { return arguments }
        var rest = Array(arguments[index...])
        let end = rest.firstIndex(of: "--") ?? rest.endIndex
        rest.insert(contentsOf: moved, at: end)
        return rest
    }
}
