"""Thin shim for tools that still call setup.py; configuration lives in pyproject.toml."""
from setuptools import setup

setup()
