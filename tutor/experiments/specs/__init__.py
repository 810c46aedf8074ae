"""One torch-free spec per built-in experiment (`SPEC`); the registry finds them here."""
