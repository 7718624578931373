"""The agent frameworks' tests (a package: its conftest is not the core tests' `conftest`)."""
