"""The product's rules the fault suite judges by, each in a module of its own: which issues a
subscription covers (coverage), which transactions every device of an account must come to hold
(taken_in), and what a client's payment states mean (states). Each is a copy of the product's rule,
written from the product's code and docs and named after it; coverage's copy is proved to agree
with the product's on shared cases (test_coverage.py beside Tests/KioskCoreTests/CoverageAgreementTests.swift)."""
