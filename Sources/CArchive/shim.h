#ifndef KIOSK_CARCHIVE_SHIM_H
#define KIOSK_CARCHIVE_SHIM_H

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

#endif
