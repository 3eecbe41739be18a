"""placeholder"""
from __future__ import annotations
import argparse
def add_run_arguments(a: argparse.ArgumentParser) -> None:
    pass
def run_command(args: argparse.Namespace) -> int:
    return 2
