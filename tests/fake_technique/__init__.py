"""A small technique that exists only for the tests: one folder, registered by one line
(`profiling.techniques.registered("tests.fake_technique.technique:FAKE")`), to show that
every surface derives from the registry (`tests/test_fake_technique.py`)."""
