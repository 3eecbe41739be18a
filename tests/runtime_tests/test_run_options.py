"""``collc bench run`` and ``bench parse`` options (issue 33): every option is documented in
``--help``, and the one NCCL_DEBUG_SUBSYS value the verdict reads is the one ``bench run`` sets and
the one the verdict's advice names."""

from __future__ import annotations

import argparse

import pytest

from collc.runtime_tests.cli import add_bench_parser
from collc.runtime_tests.parse import DEBUG_SUBSYS, parse_text


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    top = argparse.ArgumentParser()
    add_bench_parser(top)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("action", ["parse", "run", "report"])
def test_every_option_has_help(action: str) -> None:
    parser = _subparsers()[action]
    bare = [a.option_strings or [a.dest] for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and not a.help and a.option_strings]
    assert bare == [], f"bench {action} options without help: {bare}"


def test_debug_subsys_is_what_the_verdict_reads() -> None:
    assert DEBUG_SUBSYS == "INIT,ENV,COLL"
    log = parse_text("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                     "  1048576 262144 float sum -1 28.39 36.94 36.94 0 28.04 37.40 37.40 0\n")
    assert log.verdict.status == "unknown" and f"NCCL_DEBUG_SUBSYS={DEBUG_SUBSYS} " in log.verdict.reason
