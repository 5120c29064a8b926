// libarchive, loaded on first use instead of at every start.
//
// Linking libarchive made the dynamic loader map and relocate it, with libxml2, ICU, liblzma,
// liblz4, libbz2 and libacl behind it, in every `kiosk` command: 1.5 MiB of a fetch's 27 MiB peak
// (issue 44 asks for at most 24 MiB), for commands that never open an archive. Here each function
// Kiosk calls is defined under libarchive's own name and declaration (archive.h, so the compiler
// checks every signature) and calls the library's, which `dlopen` loads the first time one is
// called. The definitions are hidden: nothing outside this program can bind to them.
//
// A missing library is an error, not a crash: the functions that make an archive or an entry
// return NULL, as libarchive does when it cannot allocate, and `kiosk_archive_load_error` says
// why. Every other function takes an archive or an entry, so it runs only once the library is in.

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#pragma GCC visibility push(hidden)
#include "CArchive.h"

#define KIOSK_ARCHIVE_FUNCTIONS(X) \
    X(archive_entry_filetype) X(archive_entry_free) X(archive_entry_hardlink) X(archive_entry_hardlink_utf8) \
    X(archive_entry_new) X(archive_entry_pathname) X(archive_entry_pathname_utf8) X(archive_entry_perm) \
    X(archive_entry_set_filetype) X(archive_entry_set_gid) X(archive_entry_set_hardlink) X(archive_entry_set_hardlink_utf8) \
    X(archive_entry_set_mtime) X(archive_entry_set_pathname) X(archive_entry_set_pathname_utf8) X(archive_entry_set_perm) \
    X(archive_entry_set_rdevmajor) X(archive_entry_set_rdevminor) X(archive_entry_set_size) X(archive_entry_set_symlink) \
    X(archive_entry_set_uid) X(archive_entry_size) X(archive_entry_size_is_set) X(archive_entry_symlink) \
    X(archive_entry_symlink_utf8) X(archive_errno) X(archive_error_string) X(archive_filter_code) X(archive_format) \
    X(archive_read_data_block) X(archive_read_data_skip) X(archive_read_free) X(archive_read_new) \
    X(archive_read_next_header) X(archive_read_open) X(archive_read_open_fd) X(archive_read_open_filename) X(archive_read_open_memory) \
    X(archive_read_support_filter_bzip2) X(archive_read_support_filter_gzip) X(archive_read_support_filter_xz) \
    X(archive_read_support_filter_zstd) X(archive_read_support_format_gnutar) X(archive_read_support_format_tar) \
    X(archive_read_support_format_zip) X(archive_read_support_format_zip_streamable) X(archive_version_details) \
    X(archive_write_add_filter_gzip) X(archive_write_close) X(archive_write_data) X(archive_write_data_block) \
    X(archive_write_disk_new) X(archive_write_disk_set_options) X(archive_write_finish_entry) X(archive_write_free) \
    X(archive_write_header) X(archive_write_new) X(archive_write_open_filename) X(archive_write_open_memory) \
    X(archive_write_set_bytes_in_last_block) X(archive_write_set_format_pax_restricted) X(archive_write_set_format_raw) \
    X(archive_write_set_format_zip) X(archive_write_set_options)

#define KIOSK_SLOT(name) slot_##name,
enum { KIOSK_ARCHIVE_FUNCTIONS(KIOSK_SLOT) slot_count };
#define KIOSK_NAME(name) #name,
static const char *const names[slot_count] = { KIOSK_ARCHIVE_FUNCTIONS(KIOSK_NAME) };

// The soname of Debian's libarchive13, the ABI archive.h describes.
static const char library_name[] = "libarchive.so.13";
static void *slots[slot_count];
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen(library_name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(load_error, sizeof load_error, "%s", reason ? reason : library_name);
        return;
    }
    for (int i = 0; i < slot_count; i++) {
        slots[i] = dlsym(library, names[i]);
        if (slots[i] == NULL) {
            snprintf(load_error, sizeof load_error, "%s has no %s: not libarchive 3.6 or later", library_name, names[i]);
            return;
        }
    }
}

const char *kiosk_archive_load_error(void) {
    pthread_once(&load_once, load);
    return load_error[0] ? load_error : NULL;
}

// A constructor's function, or NULL when the library could not be loaded.
static void *optional(int slot) {
    return kiosk_archive_load_error() ? NULL : slots[slot];
}

// Any other function: its argument came from a constructor, so the library is loaded.
static void *loaded(int slot) {
    const char *error = kiosk_archive_load_error();
    if (error) {
        fprintf(stderr, "kiosk: libarchive was called before it loaded: %s\n", error);
        abort();
    }
    return slots[slot];
}

#define CALL(name) ((__typeof__(&name))loaded(slot_##name))
#define MAKE(name) __typeof__(&name) real = (__typeof__(&name))optional(slot_##name); return real ? real() : NULL
// The two shapes most of them have; the compiler still checks each against archive.h.
#define ON_ARCHIVE(name) int name(struct archive *a) { return CALL(name)(a); }
#define ENTRY_TEXT(name) const char *name(struct archive_entry *e) { return CALL(name)(e); }

struct archive *archive_read_new(void) { MAKE(archive_read_new); }
struct archive *archive_write_new(void) { MAKE(archive_write_new); }
struct archive *archive_write_disk_new(void) { MAKE(archive_write_disk_new); }
struct archive_entry *archive_entry_new(void) { MAKE(archive_entry_new); }
const char *archive_version_details(void) { MAKE(archive_version_details); }

ON_ARCHIVE(archive_errno)
const char *archive_error_string(struct archive *a) { return CALL(archive_error_string)(a); }
int archive_filter_code(struct archive *a, int n) { return CALL(archive_filter_code)(a, n); }
ON_ARCHIVE(archive_format)

ON_ARCHIVE(archive_read_free)
ON_ARCHIVE(archive_read_support_filter_bzip2)
ON_ARCHIVE(archive_read_support_filter_gzip)
ON_ARCHIVE(archive_read_support_filter_xz)
ON_ARCHIVE(archive_read_support_filter_zstd)
ON_ARCHIVE(archive_read_support_format_gnutar)
ON_ARCHIVE(archive_read_support_format_tar)
ON_ARCHIVE(archive_read_support_format_zip)
ON_ARCHIVE(archive_read_support_format_zip_streamable)
int archive_read_open(struct archive *a, void *data, archive_open_callback *open, archive_read_callback *read, archive_close_callback *close) {
    return CALL(archive_read_open)(a, data, open, read, close);
}
int archive_read_open_filename(struct archive *a, const char *path, size_t block) { return CALL(archive_read_open_filename)(a, path, block); }
int archive_read_open_fd(struct archive *a, int fd, size_t block) { return CALL(archive_read_open_fd)(a, fd, block); }
int archive_read_open_memory(struct archive *a, const void *buffer, size_t size) { return CALL(archive_read_open_memory)(a, buffer, size); }
int archive_read_next_header(struct archive *a, struct archive_entry **entry) { return CALL(archive_read_next_header)(a, entry); }
int archive_read_data_block(struct archive *a, const void **buffer, size_t *size, la_int64_t *offset) {
    return CALL(archive_read_data_block)(a, buffer, size, offset);
}
ON_ARCHIVE(archive_read_data_skip)

ON_ARCHIVE(archive_write_free)
ON_ARCHIVE(archive_write_close)
ON_ARCHIVE(archive_write_add_filter_gzip)
ON_ARCHIVE(archive_write_set_format_pax_restricted)
ON_ARCHIVE(archive_write_set_format_raw)
ON_ARCHIVE(archive_write_set_format_zip)
int archive_write_set_options(struct archive *a, const char *options) { return CALL(archive_write_set_options)(a, options); }
int archive_write_set_bytes_in_last_block(struct archive *a, int bytes) { return CALL(archive_write_set_bytes_in_last_block)(a, bytes); }
int archive_write_open_filename(struct archive *a, const char *path) { return CALL(archive_write_open_filename)(a, path); }
int archive_write_open_memory(struct archive *a, void *buffer, size_t size, size_t *used) { return CALL(archive_write_open_memory)(a, buffer, size, used); }
int archive_write_header(struct archive *a, struct archive_entry *entry) { return CALL(archive_write_header)(a, entry); }
la_ssize_t archive_write_data(struct archive *a, const void *buffer, size_t size) { return CALL(archive_write_data)(a, buffer, size); }
la_ssize_t archive_write_data_block(struct archive *a, const void *buffer, size_t size, la_int64_t offset) {
    return CALL(archive_write_data_block)(a, buffer, size, offset);
}
ON_ARCHIVE(archive_write_finish_entry)
int archive_write_disk_set_options(struct archive *a, int flags) { return CALL(archive_write_disk_set_options)(a, flags); }

void archive_entry_free(struct archive_entry *e) { CALL(archive_entry_free)(e); }
__LA_MODE_T archive_entry_filetype(struct archive_entry *e) { return CALL(archive_entry_filetype)(e); }
__LA_MODE_T archive_entry_perm(struct archive_entry *e) { return CALL(archive_entry_perm)(e); }
la_int64_t archive_entry_size(struct archive_entry *e) { return CALL(archive_entry_size)(e); }
int archive_entry_size_is_set(struct archive_entry *e) { return CALL(archive_entry_size_is_set)(e); }
ENTRY_TEXT(archive_entry_pathname)
ENTRY_TEXT(archive_entry_pathname_utf8)
ENTRY_TEXT(archive_entry_hardlink)
ENTRY_TEXT(archive_entry_hardlink_utf8)
ENTRY_TEXT(archive_entry_symlink)
ENTRY_TEXT(archive_entry_symlink_utf8)
void archive_entry_set_filetype(struct archive_entry *e, unsigned int type) { CALL(archive_entry_set_filetype)(e, type); }
void archive_entry_set_perm(struct archive_entry *e, __LA_MODE_T perm) { CALL(archive_entry_set_perm)(e, perm); }
void archive_entry_set_uid(struct archive_entry *e, la_int64_t uid) { CALL(archive_entry_set_uid)(e, uid); }
void archive_entry_set_gid(struct archive_entry *e, la_int64_t gid) { CALL(archive_entry_set_gid)(e, gid); }
void archive_entry_set_size(struct archive_entry *e, la_int64_t size) { CALL(archive_entry_set_size)(e, size); }
void archive_entry_set_mtime(struct archive_entry *e, time_t seconds, long nanoseconds) { CALL(archive_entry_set_mtime)(e, seconds, nanoseconds); }
void archive_entry_set_pathname(struct archive_entry *e, const char *path) { CALL(archive_entry_set_pathname)(e, path); }
void archive_entry_set_pathname_utf8(struct archive_entry *e, const char *path) { CALL(archive_entry_set_pathname_utf8)(e, path); }
void archive_entry_set_hardlink(struct archive_entry *e, const char *target) { CALL(archive_entry_set_hardlink)(e, target); }
void archive_entry_set_hardlink_utf8(struct archive_entry *e, const char *target) { CALL(archive_entry_set_hardlink_utf8)(e, target); }
void archive_entry_set_symlink(struct archive_entry *e, const char *target) { CALL(archive_entry_set_symlink)(e, target); }
void archive_entry_set_rdevmajor(struct archive_entry *e, dev_t major) { CALL(archive_entry_set_rdevmajor)(e, major); }
void archive_entry_set_rdevminor(struct archive_entry *e, dev_t minor) { CALL(archive_entry_set_rdevminor)(e, minor); }

#pragma GCC visibility pop
