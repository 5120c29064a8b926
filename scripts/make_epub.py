#!/usr/bin/env python3
"""Makes an EPUB 3 publication with Python's zipfile (a tool other than Kiosk): the `mimetype`
entry first and stored, `META-INF/container.xml`, a package document with Dublin Core metadata,
a navigation document and the chapters. Valid for epubcheck.

    make_epub.py OUT.epub --title T --author A --identifier urn:isbn:9780000000000 [--language en]
                 [--chapters N] [--chapter-bytes B] [--seed S] [--break mimetype|compressed|container|package]
                 [--plates N --plate-bytes B] [--revise N] [--cover]

`--break` makes a damaged one for the store's check to refuse. `--plates` adds N stored,
incompressible "plates" (a picture book's weight; PNG signature, not real pictures, so epubcheck
is not run on such a book). `--revise N` makes the next edition: chapter N gains a corrected
paragraph in its middle (`--revise 3,9,27`: each of those), everything else byte for byte the
same (what an update by chunks is measured on). `--cover` adds a cover image (a small PNG, the manifest item marked `cover-image`),
which the store serves as the book's cover. PublicationTests, ChunkedUpdateTests, CoverTests,
`make bench` and the sample store's `make sample-publications` run it.
"""
import argparse, base64, random, zipfile

# A 1×1 PNG: enough for epubcheck and for a store to serve as a cover.
COVER_PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/package.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""


def package(args, chapters):
    items = "\n".join(f'    <item id="c{n}" href="chapter-{n}.xhtml" media-type="application/xhtml+xml"/>' for n in range(1, chapters + 1))
    items += "".join(f'\n    <item id="p{n}" href="plates/plate-{n}.png" media-type="image/png"/>' for n in range(1, args.plates + 1))
    if args.cover:
        items += '\n    <item id="cover" href="images/cover.png" media-type="image/png" properties="cover-image"/>'
    spine = "\n".join(f'    <itemref idref="c{n}"/>' for n in range(1, chapters + 1))
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id" xml:lang="{args.language}">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">{args.identifier}</dc:identifier>
    <dc:title>{args.title}</dc:title>
    <dc:creator>{args.author}</dc:creator>
    <dc:language>{args.language}</dc:language>
    <dc:publisher>Kiosk Sample Press</dc:publisher>
    <dc:date>2026-11-01</dc:date>
    <dc:subject>Fiction</dc:subject>
    <meta property="dcterms:modified">2026-11-01T00:00:00Z</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
{items}
  </manifest>
  <spine>
{spine}
  </spine>
</package>
"""


def nav(args, chapters):
    links = "\n".join(f'        <li><a href="chapter-{n}.xhtml">Chapter {n}</a></li>' for n in range(1, chapters + 1))
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="{args.language}" lang="{args.language}">
  <head><title>{args.title}</title></head>
  <body>
    <nav epub:type="toc" id="toc">
      <h1>Contents</h1>
      <ol>
{links}
      </ol>
    </nav>
  </body>
</html>
"""


def chapter(args, n, rng):
    text = chapter_text(args, n, rng)
    if n in args.revise:
        middle = text.index("<p>", len(text) // 2)
        text = text[:middle] + "<p>A corrected paragraph, added in the second edition.</p>\n    " + text[middle:]
    return text


def chapter_text(args, n, rng):
    words = ["harbor", "tide", "lantern", "keel", "gull", "rope", "salt", "fog", "pier", "chart", "north", "stone", "wind", "sail"]
    paragraphs = []
    size = 0
    while size < args.chapter_bytes:
        text = " ".join(rng.choice(words) for _ in range(60))
        paragraphs.append(f"    <p>{text}.</p>")
        size += len(text) + 12
    body = "\n".join(paragraphs)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="{args.language}" lang="{args.language}">
  <head><title>Chapter {n}</title></head>
  <body>
    <h1>Chapter {n}</h1>
{body}
  </body>
</html>
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--title", default="A Sample Book")
    parser.add_argument("--author", default="A. Writer")
    parser.add_argument("--identifier", default="urn:uuid:00000000-0000-4000-8000-000000000047")
    parser.add_argument("--language", default="en")
    parser.add_argument("--chapters", type=int, default=3)
    parser.add_argument("--chapter-bytes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--plates", type=int, default=0)
    parser.add_argument("--plate-bytes", type=int, default=1 << 20)
    parser.add_argument("--revise", type=lambda text: {int(n) for n in text.split(",")}, default=set())
    parser.add_argument("--cover", action="store_true")
    parser.add_argument("--break", dest="damage", choices=["mimetype", "compressed", "container", "package"])
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with zipfile.ZipFile(args.out, "w") as zipped:
        class Fixed:
            """Every entry with one date, so that the same arguments make the same bytes."""
            def writestr(self, name, data, compress_type):
                info = name if isinstance(name, zipfile.ZipInfo) else zipfile.ZipInfo(name)
                info.date_time = (2026, 11, 1, 0, 0, 0)
                info.compress_type = compress_type
                zipped.writestr(info, data)
        epub = Fixed()
        if args.damage != "mimetype":
            method = zipfile.ZIP_DEFLATED if args.damage == "compressed" else zipfile.ZIP_STORED
            epub.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=method)
        if args.damage != "container":
            epub.writestr("META-INF/container.xml", CONTAINER, compress_type=zipfile.ZIP_DEFLATED)
        if args.damage != "package":
            epub.writestr("OEBPS/package.opf", package(args, args.chapters), compress_type=zipfile.ZIP_DEFLATED)
        epub.writestr("OEBPS/nav.xhtml", nav(args, args.chapters), compress_type=zipfile.ZIP_DEFLATED)
        for n in range(1, args.chapters + 1):
            epub.writestr(f"OEBPS/chapter-{n}.xhtml", chapter(args, n, rng), compress_type=zipfile.ZIP_DEFLATED)
        if args.cover:
            epub.writestr("OEBPS/images/cover.png", COVER_PNG, compress_type=zipfile.ZIP_STORED)
        for n in range(1, args.plates + 1):
            plate = random.Random(f"plate-{n}-{args.seed}").randbytes(args.plate_bytes)
            epub.writestr(f"OEBPS/plates/plate-{n}.png", b"\x89PNG\r\n\x1a\n" + plate, compress_type=zipfile.ZIP_STORED)
        if args.damage == "mimetype":
            epub.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)


if __name__ == "__main__":
    main()
