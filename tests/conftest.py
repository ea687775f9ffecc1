"""Shared fixtures: the lab (tests/lab_fixture.py) for tests that need several hosts."""
pytest_plugins = ["tests.lab_fixture"]
