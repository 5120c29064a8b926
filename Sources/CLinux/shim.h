#ifndef KIOSK_CLINUX_SHIM_H
#define KIOSK_CLINUX_SHIM_H

// Linux calls Swift's Glibc module leaves out because they need _GNU_SOURCE.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>

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

#endif
