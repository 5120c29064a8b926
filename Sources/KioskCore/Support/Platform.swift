#if os(Linux)
import CLinux
import Glibc
#else
import Darwin
#endif

/// The few calls Kiosk makes that Linux has and other systems lack or spell differently, behind
/// portable names: the rest of Kiosk reads as portable Swift. Each has a fallback that keeps the
/// promise (the callers handle a `false` or a short answer as they would on an older kernel).
public enum Platform {
    /// Swaps two paths in one step (`renameat2` with `RENAME_EXCHANGE`), so a reader sees the old
    /// folder or the new one, never neither. False (with `errno` EINVAL or ENOSYS) where the file
    /// system or the system cannot: the caller then moves by two renames.
    public static func exchange(_ from: String, _ to: String) -> Bool {
        #if os(Linux)
        return kiosk_exchange(from, to) == 0
        #else
        errno = ENOSYS
        return false
        #endif
    }

    /// Copies up to `length` bytes from `input` at `offset` to `output` at the same offset inside
    /// the kernel (`copy_file_range`). Returns the bytes copied, 0 at the end of `input`, or -1
    /// (with `errno` EXDEV, ENOSYS or EINVAL where it cannot: the caller then copies by hand).
    public static func copyRange(from input: Int32, to output: Int32, offset: Int64, length: Int64) -> Int64 {
        #if os(Linux)
        return kiosk_copy_range(input, output, offset, length)
        #else
        errno = ENOSYS
        return -1
        #endif
    }

    /// Copies up to `length` bytes from `input` at `inputOffset` to `output` at `outputOffset`
    /// inside the kernel; as ``copyRange(from:to:offset:length:)`` otherwise.
    public static func copyRange(from input: Int32, at inputOffset: Int64, to output: Int32, at outputOffset: Int64, length: Int64) -> Int64 {
        #if os(Linux)
        return kiosk_copy_between(input, inputOffset, output, outputOffset, length)
        #else
        errno = ENOSYS
        return -1
        #endif
    }

    /// Opens a new file with no name on the file system of `folder` (`O_TMPFILE`), gone once
    /// closed: a process killed while it is open leaves nothing in the folder. -1 (with `errno`
    /// EOPNOTSUPP, EISDIR or ENOSYS) where it cannot: the caller then makes a named file.
    public static func openUnnamed(in folder: String) -> Int32 {
        #if os(Linux)
        return kiosk_open_unnamed(folder)
        #else
        errno = ENOSYS
        return -1
        #endif
    }

    /// Starts writing back the dirty pages of `[offset, offset + length)` (length 0: to the end)
    /// without waiting, so the fsync that makes a file durable finds little left to do. A hint:
    /// where there is no such call it does nothing, and the fsync does all the work.
    @discardableResult
    public static func startWriteback(_ descriptor: Int32, offset: Int64, length: Int64) -> Bool {
        #if os(Linux)
        return kiosk_start_writeback(descriptor, offset, length) == 0
        #else
        return true
        #endif
    }

    /// Reserves `size` bytes of disk for the file (`posix_fallocate`): true when they are its own.
    public static func reserve(_ descriptor: Int32, size: Int64) -> Bool {
        #if os(Linux)
        return posix_fallocate(descriptor, 0, off_t(size)) == 0
        #else
        var store = fstore_t(fst_flags: UInt32(F_ALLOCATEALL), fst_posmode: F_PEOFPOSMODE, fst_offset: 0, fst_length: off_t(size), fst_bytesalloc: 0)
        return fcntl(descriptor, F_PREALLOCATE, &store) != -1 && ftruncate(descriptor, off_t(size)) == 0
        #endif
    }
}
