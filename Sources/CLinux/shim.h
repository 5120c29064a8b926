#ifndef KIOSK_CLINUX_SHIM_H
#define KIOSK_CLINUX_SHIM_H

// Linux calls Swift's Glibc module leaves out because they need _GNU_SOURCE.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>

// Declared as glibc does in <stdio.h> and <unistd.h>, which this header does not include: those
// would clash with the same headers that the CCurl module brings in.
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
extern __ssize_t copy_file_range(int infd, __off64_t *pinoff, int outfd, __off64_t *poutoff, __SIZE_TYPE__ length, unsigned int flags);
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/// Starts writing back the dirty pages of [offset, offset + length) without waiting for them, so
/// the fsync that makes a finished download durable finds little left to do.
static inline int kiosk_start_writeback(int descriptor, long long offset, long long length) {
    return sync_file_range(descriptor, offset, length, SYNC_FILE_RANGE_WRITE);
}

/// Waits until the pages of [offset, offset + length) that were being written back are on disk.
static inline int kiosk_wait_writeback(int descriptor, long long offset, long long length) {
    return sync_file_range(descriptor, offset, length,
                           SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
}

/// Opens a new file with no name in the folder `folder` (O_TMPFILE): it lives on the folder's file
/// system and disappears when closed, so a process killed while holding it leaves nothing behind.
/// Fails with EOPNOTSUPP or EISDIR where the file system cannot.
static inline int kiosk_open_unnamed(const char *folder) {
    return open(folder, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
}

/// Swaps two paths in one step (renameat2 with RENAME_EXCHANGE): the library shows the old
/// version or the new one, never neither. Fails with EINVAL on a file system that cannot.
static inline int kiosk_exchange(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
}

/// Copies up to `length` bytes from `from` at `offset` to `to` at the same offset, inside the kernel.
static inline long long kiosk_copy_range(int from, int to, long long offset, long long length) {
    __off64_t in = offset, out = offset;
    return (long long)copy_file_range(from, &in, to, &out, (size_t)length, 0);
}

/// Copies up to `length` bytes from `from` at `fromOffset` to `to` at `toOffset`, inside the kernel.
static inline long long kiosk_copy_between(int from, long long fromOffset, int to, long long toOffset, long long length) {
    __off64_t in = fromOffset, out = toOffset;
    return (long long)copy_file_range(from, &in, to, &out, (size_t)length, 0);
}

#endif
