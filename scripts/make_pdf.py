#!/usr/bin/env python3
"""Makes a small PDF magazine issue with Python alone (a tool other than Kiosk): one page of
text per article, Helvetica, with a correct cross-reference table, so that `qpdf --check`
passes it. The bundled store's PDF issue was made by it:

    make_pdf.py OUT.pdf --title "Coastal Charts, Winter 2026" --pages 3
"""
import argparse


def build(title, pages):
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for n in range(1, pages + 1):
        lines = [title, f"Page {n} of {pages}", "", "Tide tables, soundings and the lights of the coast,",
                 "charted for the season by the Kiosk Sample Press."]
        text = "BT /F1 14 Tf 50 740 Td 18 TL " + " ".join(f"({line.replace('(', '[').replace(')', ']')}) '" for line in lines) + " ET"
        stream = text.encode()
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{text}\nendstream")
        content = len(objects)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R /Resources << /Font << /F1 3 0 R >> >> >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {pages} >>"
    out = b"%PDF-1.4\n"
    offsets = []
    for index, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{index} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--title", default="A Sample Issue")
    parser.add_argument("--pages", type=int, default=3)
    args = parser.parse_args()
    with open(args.out, "wb") as file:
        file.write(build(args.title, args.pages))


if __name__ == "__main__":
    main()
