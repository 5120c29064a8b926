#!/usr/bin/env python3
"""Judges OPDS Progression documents with jsonschema (PyPI) against the draft's JSON Schema
(Tests/Fixtures/opds-progression), and reads `modified` as an ISO 8601 date and time.

    progression_check.py FILE [FILE …]

Prints one line per document; exits 1 when any fails. OPDS12Tests runs it.
"""
import datetime, json, os, sys

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Fixtures", "opds-progression", "progression.schema.json")


def main():
    schema = json.load(open(SCHEMA))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    failed = False
    for path in sys.argv[1:]:
        document = json.load(open(path))
        problems = [error.message for error in validator.iter_errors(document)]
        try:
            datetime.datetime.fromisoformat(document.get("modified", "").replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"modified is not an ISO 8601 date and time: {document.get('modified')!r}")
        print(f"{path}: {'ok' if not problems else 'errors: ' + '; '.join(problems)}")
        failed = failed or bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
