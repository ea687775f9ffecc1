"""Shared fixtures: the lab (tests/lab_fixture.py) for tests that need several hosts."""
pytest_plugins = ["tests.mpi_shm", "tests.lab_fixture"]
