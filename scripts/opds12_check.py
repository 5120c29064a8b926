#!/usr/bin/env python3
"""Judges the OPDS 1.2 documents Kiosk serves with two independent tools: `jing` (Debian's RELAX NG
validator) against the OPDS 1.2 schema (Tests/Fixtures/opds-1.2), and `feedparser` (PyPI), which
must read each feed without complaint and find its entries and links.

    opds12_check.py [--authorization "Basic …"] URL [URL …]

The Authorization header, when given, is sent with every URL (the shelf asks for credentials).
An OpenSearch description (its URL ends in opensearch.xml) is checked for a search template that
names {searchTerms}. Prints one line per document; exits 1 when any fails. OPDSTests runs it.
"""
import os, shutil, subprocess, sys, tempfile, urllib.request
import xml.etree.ElementTree as ElementTree

import feedparser

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Fixtures", "opds-1.2", "opds.rnc")


def main():
    arguments = sys.argv[1:]
    headers = {}
    if arguments[:1] == ["--authorization"]:
        headers["Authorization"] = arguments[1]
        arguments = arguments[2:]
    jing = shutil.which("jing")
    if jing is None:
        print("jing is missing: run make test-tools (it installs Debian's jing)", file=sys.stderr)
        sys.exit(2)
    failed = False
    for url in arguments:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
            body = answer.read()
            kind = answer.headers.get("Content-Type", "")
        problems = []
        if url.endswith("opensearch.xml"):
            root = ElementTree.fromstring(body)
            templates = [element.get("template", "") for element in root.iter("{http://a9.com/-/spec/opensearch/1.1/}Url")]
            if not any("{searchTerms}" in template for template in templates):
                problems.append(f"no search template with {{searchTerms}} ({templates})")
        else:
            with tempfile.NamedTemporaryFile(suffix=".xml") as document:
                document.write(body)
                document.flush()
                # Without its performance counters the JVM leaves no /tmp/hsperfdata_USER behind (it
                # ignores TMPDIR); Debian's jing launcher sets JAVA_ARGS itself, so the JVM's own
                # variable carries the option (and a "Picked up" line on stderr, which is not read).
                validated = subprocess.run([jing, "-c", SCHEMA, document.name], capture_output=True, text=True,
                                           env={**os.environ, "JAVA_TOOL_OPTIONS": "-XX:-UsePerfData"})
            if validated.returncode != 0:
                problems += [line for line in validated.stdout.splitlines() if "error" in line]
            parsed = feedparser.parse(body)
            if parsed.bozo:
                problems.append(f"feedparser: {parsed.bozo_exception}")
            if "profile=opds-catalog" not in kind:
                problems.append(f"served as {kind!r}, not an OPDS catalog type")
            is_entry = "type=entry" in kind
            if not is_entry and not parsed.feed.get("title"):
                problems.append("feedparser finds no feed title")
            for entry in parsed.entries:
                if not entry.get("id") or not entry.get("links"):
                    problems.append(f"feedparser finds an entry without an id or links: {entry.get('title')!r}")
        print(f"{url}: {'ok' if not problems else 'errors: ' + '; '.join(problems)}")
        failed = failed or bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
