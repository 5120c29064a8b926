#!/usr/bin/env python3
"""Makes damaged and hostile EPUBs from a good one (made by make_epub.py) for the store's check to
refuse: PublicationTests runs it.

    hostile_epubs.py GOOD.epub OUT-FOLDER

Writes badcrc.epub (a deflated chapter's bytes flipped), slip.epub (an entry named ../evil.txt),
link.epub (a symbolic link entry to /etc/passwd), bomb.epub (300 MB of zeros in under 1 MB),
extra.epub (an extra field in mimetype's header) and twice.epub (a chapter given twice).
"""
import shutil, sys, zipfile
from pathlib import Path

good, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)


def copy_with(name, extra):
    """The good EPUB's entries, in order, then what `extra` adds."""
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(out / name, "w") as target:
        for info in source.infolist():
            target.writestr(info, source.read(info.filename))
        extra(target)


# A flipped byte in the middle of a deflated chapter: its CRC (or its inflation) fails.
data = bytearray(good.read_bytes())
with zipfile.ZipFile(good) as source:
    chapter = next(i for i in source.infolist() if i.filename.endswith("chapter-1.xhtml"))
start = chapter.header_offset + 30 + len(chapter.filename.encode()) + len(chapter.extra)
data[start + chapter.compress_size // 2] ^= 0xFF
(out / "badcrc.epub").write_bytes(bytes(data))

copy_with("slip.epub", lambda z: z.writestr("../evil.txt", "outside"))


def link(z):
    info = zipfile.ZipInfo("OEBPS/passwd")
    info.create_system = 3
    info.external_attr = (0o120777 << 16)
    z.writestr(info, "/etc/passwd")


copy_with("link.epub", link)
copy_with("bomb.epub", lambda z: z.writestr("OEBPS/zeros.bin", bytes(300 << 20), compress_type=zipfile.ZIP_DEFLATED))

# mimetype with an extra field in its local header.
with zipfile.ZipFile(good) as source, zipfile.ZipFile(out / "extra.epub", "w") as target:
    for info in source.infolist():
        if info.filename == "mimetype":
            info.extra = b"\xfe\xca\x00\x00"
        target.writestr(info, source.read(info.filename))


def twice(z):
    import warnings
    warnings.simplefilter("ignore")
    z.writestr("OEBPS/chapter-1.xhtml", "<html/>")


copy_with("twice.epub", twice)
