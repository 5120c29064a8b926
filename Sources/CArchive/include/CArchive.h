#ifndef KIOSK_CARCHIVE_H
#define KIOSK_CARCHIVE_H

// libarchive's own declarations. The program does not link libarchive: LazyArchive.c defines
// the functions Kiosk calls, and loads the library on the first of them (see there why).
#include <archive.h>
#include <archive_entry.h>

// libarchive's file-type constants are cast macros, which Swift does not import.
static const unsigned int kiosk_ae_ifmt = AE_IFMT;
static const unsigned int kiosk_ae_ifreg = AE_IFREG;
static const unsigned int kiosk_ae_iflnk = AE_IFLNK;
static const unsigned int kiosk_ae_ifdir = AE_IFDIR;
static const unsigned int kiosk_ae_ifsock = AE_IFSOCK;
static const unsigned int kiosk_ae_ifchr = AE_IFCHR;
static const unsigned int kiosk_ae_ifblk = AE_IFBLK;
static const unsigned int kiosk_ae_ififo = AE_IFIFO;

/// Why libarchive could not be loaded (the loader's message, naming the file), or NULL when it is loaded. The
/// functions that make an archive or an entry return NULL in that case; call this to say why.
const char *kiosk_archive_load_error(void);

#endif
