"""Prefix/KV caching: how much prompt work a server could reuse, measured.

`sample` parses a user's prompt file (no torch), `reuse` finds the shared
prefixes in it with a token trie (no torch), `measure` times prefills with a
reused cache against cold ones (torch), `report` turns the numbers into a
finding, and `results` holds the serialisable result types (no torch).
The experiment itself is `profiling.caching.experiment`.
"""
