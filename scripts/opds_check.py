#!/usr/bin/env python3
"""Parses OPDS 2.0 documents with palace-webpub-manifest-parser (PyPI), an independent judge of
what Kiosk serves: each URL's document must parse with no syntax or semantic error.

    opds_check.py URL [URL …]

Prints one line per document; exits 1 when any has an error. OPDSTests runs it.
"""
import json, sys, urllib.request

from webpub_manifest_parser.opds2 import OPDS2FeedParserFactory


def main():
    failed = False
    for url in sys.argv[1:]:
        with urllib.request.urlopen(url) as answer:
            document = json.loads(answer.read())
        result = OPDS2FeedParserFactory().create().parse_json(document)
        errors = [str(error) for error in result.errors]
        print(f"{url}: {'ok' if not errors else 'errors: ' + '; '.join(errors)}")
        failed = failed or bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
