"""Helpers shared by the tests under tests/ (and, for ansible_run, by the molecule tests).

Importable as ``support.*`` because tests/conftest.py puts tests/ on sys.path.
"""
