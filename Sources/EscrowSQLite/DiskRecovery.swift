import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Makes the disk hold what the page cache holds, after a failed write or fsync. Linux marks the pages a failed fsync
/// could not write clean: the cache shows bytes the disk lacks, and a later fsync does not write them. Reading every
/// block of a file and writing the same bytes back makes every page dirty again, so the next fsync writes them all;
/// when it succeeds, the file on the disk is the file SQLite and every reader saw. (Written by hand: no library here
/// rewrites a file in place; SQLite's own checkpoint copies only the WAL's committed frames.)
enum DiskRecovery {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static let blockSize = 64 * 1024

    /// Reads every block of `path` and writes it back in place, then `fdatasync`s it. A missing file (no WAL) is
    /// nothing to do.
    static func rewrite(_ path: String) throws(Failure) {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return }
            throw Failure(description: "open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: blockSize)
        var offset: off_t = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, blockSize, offset) }
            guard count >= 0 else { throw Failure(description: "read \(path): \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            var written = 0
            while written < count {
                let result = buffer.withUnsafeBytes {
                    pwrite(descriptor, $0.baseAddress! + written, count - written, offset + off_t(written))
                }
                guard result > 0 else {
                    throw Failure(description: "write \(path): \(String(cString: strerror(errno)))")
                }
                written += result
            }
            offset += off_t(count)
        }
        guard fdatasync(descriptor) == 0 else {
            throw Failure(description: "sync \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// `fsync`s the folder of `path` (its entries: the WAL's, created since the last sync).
    static func syncFolder(of path: String) throws(Failure) {
        let folder = (path as NSString).deletingLastPathComponent
        let descriptor = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(description: "open \(folder): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw Failure(description: "sync \(folder): \(String(cString: strerror(errno)))")
        }
    }
}
