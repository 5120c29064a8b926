#!/usr/bin/env python3
"""Parses OPDS 2.0 documents with palace-webpub-manifest-parser (PyPI), an independent judge of
what Kiosk serves: each URL's document must parse with no syntax or semantic error.

    opds_check.py [--authorization "Basic …"] URL [URL …]

The Authorization header, when given, is sent with every URL (the shelf asks for credentials).
Prints one line per document; exits 1 when any has an error. OPDSTests runs it. (The package
parses feeds and publications; it has no parser for Authentication for OPDS documents, whose
fields OPDSTests checks itself.)
"""
import json, sys, urllib.request

from webpub_manifest_parser.opds2 import OPDS2FeedParserFactory


def main():
    failed = False
    arguments = sys.argv[1:]
    # Asked as a 2.0 app asks: /opds answers Atom to an app that names no format.
    headers = {"Accept": "application/opds+json"}
    if arguments[:1] == ["--authorization"]:
        headers["Authorization"] = arguments[1]
        arguments = arguments[2:]
    for url in arguments:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
            document = json.loads(answer.read())
        result = OPDS2FeedParserFactory().create().parse_json(document)
        errors = [str(error) for error in result.errors]
        print(f"{url}: {'ok' if not errors else 'errors: ' + '; '.join(errors)}")
        failed = failed or bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
